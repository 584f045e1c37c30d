"""Token embedding plus position encoding."""

import math

import keras
from keras import ops

from keras_transformer._validation import check_positive_int
from keras_transformer.layers.position_encoding import LAYOUTS, sinusoidal_position_encoding

_ENCODINGS = ("sinusoidal", "learned")


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEmbedding(keras.layers.Layer):
    """Embeds token ids and adds the encoding of their positions.

    `output = embedding(token_ids) * sqrt(d_model) + PE[start_index + i]`, the
    input layer of the paper's encoder and decoder. The output's Keras mask is
    `token_ids != 0` (when `mask_zero`), so padding masks reach the attention
    layers through mask propagation.

    Args:
        vocab_size: number of token ids.
        d_model: embedding size.
        max_length: longest sequence the position encoding covers.
        position_encoding: `"sinusoidal"` (the paper's fixed encoding) or
            `"learned"` (a trained position embedding).
        scale_embeddings: multiply token embeddings by `sqrt(d_model)`.
        position_layout: channel order of the sinusoidal table:
            `"interleaved"` (the paper's sines and cosines alternating) or
            `"halves"` (all sines, then all cosines: Marian's, fairseq's).
        mask_zero: whether id 0 is padding and masked.
        **kwargs: base layer arguments.

    Call arguments:
        token_ids: int `[batch, length]`.
        start_index: position of the first token (for incremental decoding).

    Returns:
        `[batch, length, d_model]`.

    Example:

    >>> layer = PositionalEmbedding(vocab_size=100, d_model=16)
    >>> tuple(layer(np.array([[5, 6, 0]])).shape)
    (1, 3, 16)
    """

    def __init__(
        self,
        vocab_size,
        d_model,
        max_length=2048,
        position_encoding="sinusoidal",
        scale_embeddings=True,
        mask_zero=True,
        position_layout="interleaved",
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (
            ("vocab_size", vocab_size),
            ("d_model", d_model),
            ("max_length", max_length),
        ):
            check_positive_int(name, value)
        if position_encoding not in _ENCODINGS:
            raise ValueError(
                f"`position_encoding` must be one of {_ENCODINGS}. "
                f"Received: position_encoding={position_encoding!r}"
            )
        if position_layout not in LAYOUTS:
            raise ValueError(
                f"`position_layout` must be one of {LAYOUTS}. "
                f"Received: position_layout={position_layout!r}"
            )
        self.vocab_size = vocab_size
        self.position_layout = position_layout
        self.d_model = d_model
        self.max_length = max_length
        self.position_encoding = position_encoding
        self.scale_embeddings = scale_embeddings
        self.mask_zero = mask_zero
        self.supports_masking = mask_zero
        self._encoding_table = None
        self._table = None
        if position_encoding != "learned":
            self._encoding_table = sinusoidal_position_encoding(
                max_length, d_model, layout=position_layout
            )
            # One backend tensor, made here where no function is being
            # traced: every traced function (each `tf.function`, each
            # signature and search loop of a SavedModel) that reads positions
            # known only when it runs captures it, rather than embedding a
            # copy of its own (2 MB at the default `max_length` and `d_model`
            # 256). A SavedModel stores it once.
            self._table = ops.convert_to_tensor(self._encoding_table)

    def build(self, input_shape=None):
        # With the sqrt(d_model) scale, N(0, 1/d_model) gives unit-variance
        # inputs, as in tensor2tensor; also a good tied output projection.
        stddev = self.d_model**-0.5 if self.scale_embeddings else 0.05
        self.token_embedding = keras.layers.Embedding(
            self.vocab_size,
            self.d_model,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=stddev),
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.token_embedding.build((None, None))
        if self.position_encoding == "learned":
            self.position_embedding = keras.layers.Embedding(
                self.max_length,
                self.d_model,
                embeddings_initializer=keras.initializers.RandomNormal(stddev=0.02),
                dtype=self.dtype_policy,
                name="position_embedding",
            )
            self.position_embedding.build((None,))

    @property
    def encoding_table(self):
        """The sinusoidal table, a float32 NumPy array `[max_length,
        d_model]`; None for learned positions."""
        return self._encoding_table

    @property
    def embeddings(self):
        """The token embedding matrix `[vocab_size, d_model]`."""
        return self.token_embedding.embeddings

    def position_encodings(self, length, start_index=0):
        """Returns the position encodings of `start_index ... + length - 1`."""
        static_end = None
        if isinstance(length, int) and isinstance(start_index, int):
            static_end = start_index + length
        if static_end is not None and static_end > self.max_length:
            raise ValueError(
                f"Sequence positions up to {static_end} exceed "
                f"max_length={self.max_length} of layer '{self.name}'. Truncate "
                "the input or build the layer with a larger `max_length`."
            )
        if self.position_encoding == "learned":
            table = ops.convert_to_tensor(self.position_embedding.embeddings)
        elif static_end is not None:
            # The rows needed, no more: a traced function holds [length,
            # d_model] of the table, not all of it.
            rows = self._encoding_table[start_index:static_end]
            return ops.cast(ops.convert_to_tensor(rows), self.compute_dtype)
        else:
            table = self._table
        # A slice, not a gather: TensorFlow's slice fails for positions past
        # the table on every device, where a gather on a GPU returns zeros.
        start = ops.cast(start_index, "int32")
        rows = ops.slice(table, (start, 0), (length, self.d_model))
        return ops.cast(rows, self.compute_dtype)

    def call(self, token_ids, start_index=0):
        x = self.token_embedding(token_ids)  # [batch, length, d_model]
        if self.scale_embeddings:
            x = x * ops.cast(math.sqrt(self.d_model), x.dtype)
        length = token_ids.shape[-1]
        if length is None:
            length = ops.shape(token_ids)[-1]
        return x + ops.cast(self.position_encodings(length, start_index), x.dtype)

    def compute_mask(self, token_ids, mask=None):
        if not self.mask_zero:
            return None
        return ops.not_equal(token_ids, 0)

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.d_model)

    def get_config(self):
        config = {
            "vocab_size": self.vocab_size,
            "d_model": self.d_model,
            "max_length": self.max_length,
            "position_encoding": self.position_encoding,
            "scale_embeddings": self.scale_embeddings,
            "mask_zero": self.mask_zero,
            "position_layout": self.position_layout,
        }
        return {**super().get_config(), **config}
