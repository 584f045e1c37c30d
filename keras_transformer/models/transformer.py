"""The encoder-decoder Transformer of "Attention Is All You Need"."""

import inspect

import keras
from keras import ops

from keras_transformer._validation import check_positive_int, check_rate, shown_names
from keras_transformer.layers import Decoder, Encoder, PositionalEmbedding, _rows, activations
from keras_transformer.layers._initializers import (
    read_weight_options,
    weight_options,
    weight_options_config,
)
from keras_transformer.models.presets import preset_config

# Up to this many rows (tokens), a compiled decoding step's tied projection
# reads the embedding table as stored (`Transformer._logits`); more rows
# take `rows · Eᵀ`, as training does. Measured with a 58,000 x 512 table at
# one thread on an AVX2 AMD EPYC, compiled: 24.5 against 44.6 ms at 4 rows,
# 50.0 against 62.7 at 32, 90.0 against 85.8 at 64 and 188 against 151 at
# 128. A step that is not compiled (oneDNN) reads the table as stored at
# any row count: 38 against 347 ms at 4 rows, 196 against 451 at 128.
TABLE_MAJOR_MAX_ROWS = 32
# The decoder blocks' dropout seeds start here past the encoder's (`seed + offset`).
DECODER_SEEDS = 1 << 16


def check_vocab_sizes(source_vocab_size, target_vocab_size):
    """Raises a `ValueError` naming whichever vocabulary size is missing."""
    for name, size in (
        ("source_vocab_size", source_vocab_size),
        ("target_vocab_size", target_vocab_size),
    ):
        if size is None:
            raise ValueError(f"`{name}` is required. Received: {name}=None")


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(keras.Model):
    """Encoder-decoder Transformer for sequence-to-sequence tasks.

    `call((source_ids, target_ids))` returns float32 logits for the next
    token at every target position (teacher forcing). For decoding, `encode`
    and `decode` are separate entry points, and `init_decoding_state` with
    `decode_step` form the step function that `keras_transformer.decoding`
    searches over, with a fixed-size key/value cache.

    Token id 0 is padding in both vocabularies.

    Args:
        num_layers: number of encoder blocks (and of decoder blocks,
            unless `num_decoder_layers` says otherwise).
        d_model: model width.
        num_heads: attention heads; must divide `d_model`.
        dff: feed-forward hidden size.
        source_vocab_size: source vocabulary size.
        target_vocab_size: target vocabulary size.
        dropout: dropout of the embeddings and of every residual branch,
            as the layers' `dropout`.
        max_length: longest source or target sequence.
        norm_first: pre-norm blocks instead of the paper's post-norm.
        share_embeddings: one embedding matrix for source, target and the
            output projection (needs equal vocabulary sizes, e.g. a joint
            subword vocabulary), as in the paper.
        activation: feed-forward activation.
        position_encoding: `"sinusoidal"` or `"learned"`.
        position_layout: channel order of the sinusoidal table,
            `"interleaved"` (the paper's) or `"halves"` (Marian's).
        scale_embeddings: multiply token embeddings by `sqrt(d_model)`, as
            the paper (Marian: `scale_embedding`).
        tie_output_embeddings: the output projection is the transposed
            target embedding, with separate source and target
            vocabularies too (Marian's `decoder_vocab_size`). None
            (default) follows `share_embeddings`; False with
            `share_embeddings` keeps one embedding for source and target
            and gives the output a projection of its own (Marian's
            `tie_word_embeddings=false`).
        output_bias: add a trained bias to the tied output projection
            (Marian's `final_logits_bias`); an untied projection always
            has one.
        num_decoder_layers: number of decoder blocks; None (default) is
            `num_layers`. A deep encoder with a shallow decoder decodes
            faster for much the same quality (Kasai et al., 2021; the
            distilled students of OPUS-MT, Marian's `decoder_layers`).
        decoder_num_heads: attention heads of the decoder blocks; None
            (default) is `num_heads` (Marian's `decoder_attention_heads`).
        decoder_dff: feed-forward hidden size of the decoder blocks; None
            (default) is `dff` (Marian's `decoder_ffn_dim`).
        layer_norm_epsilon: epsilon of every layer norm.
        kernel_initializer: initializer of the blocks' kernels.
        bias_initializer: initializer of the blocks' biases.
        attention_dropout: dropout of the attention weights; `None`
            (default) uses `dropout`, as the paper (fairseq uses 0).
        kernel_regularizer, bias_regularizer: regularizers of the blocks'
            kernels and biases (the embeddings and the output projection
            keep none).
        kernel_constraint, bias_constraint: constraints of the blocks'
            kernels and biases.
        seed: seed of every dropout (the embeddings', and each block's
            from its own offset); None draws from Keras's global seed.
        **kwargs: base model arguments.

    Example:

    >>> model = Transformer.from_preset("tiny", 100, 120)
    >>> logits = model((np.ones((2, 7)), np.ones((2, 5))))
    >>> tuple(logits.shape)
    (2, 5, 120)
    """

    def __init__(
        self,
        num_layers,
        d_model,
        num_heads,
        dff,
        source_vocab_size=None,
        target_vocab_size=None,
        dropout=0.1,
        max_length=2048,
        norm_first=False,
        share_embeddings=False,
        activation="relu",
        position_encoding="sinusoidal",
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        attention_dropout=None,
        position_layout="interleaved",
        scale_embeddings=True,
        tie_output_embeddings=None,
        output_bias=False,
        num_decoder_layers=None,
        decoder_num_heads=None,
        decoder_dff=None,
        kernel_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_vocab_sizes(source_vocab_size, target_vocab_size)
        # The embeddings' dropout is built here, before the blocks check theirs.
        check_rate("dropout", dropout)
        if attention_dropout is not None:
            check_rate("attention_dropout", attention_dropout)
        for name, value in (
            ("num_decoder_layers", num_decoder_layers),
            ("decoder_num_heads", decoder_num_heads),
            ("decoder_dff", decoder_dff),
        ):
            if value is not None:
                check_positive_int(name, value)
        if share_embeddings and source_vocab_size != target_vocab_size:
            raise ValueError(
                "`share_embeddings=True` needs one vocabulary for source and "
                f"target. Received: source_vocab_size={source_vocab_size}, "
                f"target_vocab_size={target_vocab_size}"
            )
        if tie_output_embeddings is None:
            tie_output_embeddings = share_embeddings
        self.num_layers = num_layers
        self.num_decoder_layers = num_layers if num_decoder_layers is None else num_decoder_layers
        self.position_layout = position_layout
        self.scale_embeddings = scale_embeddings
        self.tie_output_embeddings = bool(tie_output_embeddings)
        self.output_bias = bool(output_bias)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.decoder_num_heads = num_heads if decoder_num_heads is None else decoder_num_heads
        self.decoder_dff = dff if decoder_dff is None else decoder_dff
        if decoder_num_heads is not None and d_model % decoder_num_heads:
            raise ValueError(
                "`d_model` must be divisible by `decoder_num_heads`. "
                f"Received: d_model={d_model}, decoder_num_heads={decoder_num_heads}"
            )
        self.source_vocab_size = source_vocab_size
        self.target_vocab_size = target_vocab_size
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.max_length = max_length
        self.norm_first = norm_first
        self.share_embeddings = share_embeddings
        self.activation = activation
        self.position_encoding = position_encoding
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        read_weight_options(
            self, kernel_regularizer, bias_regularizer, kernel_constraint, bias_constraint
        )
        self.seed = seed

        def embedding(vocab_size, name):
            return PositionalEmbedding(
                vocab_size,
                d_model,
                max_length=max_length,
                position_encoding=position_encoding,
                position_layout=position_layout,
                scale_embeddings=scale_embeddings,
                dtype=self.dtype_policy,
                name=name,
            )

        blocks = dict(
            num_layers=num_layers,
            d_model=d_model,
            num_heads=num_heads,
            dff=dff,
            dropout=dropout,
            attention_dropout=attention_dropout,
            norm_first=norm_first,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            **weight_options(self),
            seed=seed,
            dtype=self.dtype_policy,
        )
        self.source_embedding = embedding(source_vocab_size, "source_embedding")
        self.target_embedding = (
            self.source_embedding
            if share_embeddings
            else embedding(target_vocab_size, "target_embedding")
        )
        self.embedding_dropout = keras.layers.Dropout(
            dropout, seed=seed, dtype=self.dtype_policy, name="embedding_dropout"
        )
        self.encoder = Encoder(name="encoder", **blocks)
        self.decoder = Decoder(
            name="decoder",
            **{
                **blocks,
                "num_layers": self.num_decoder_layers,
                "num_heads": self.decoder_num_heads,
                "dff": self.decoder_dff,
                # The decoder's blocks draw past the encoder's.
                "seed": None if seed is None else seed + DECODER_SEEDS,
            },
        )
        self.output_projection = None
        if not self.tie_output_embeddings:
            self.output_projection = keras.layers.Dense(
                target_vocab_size, dtype=self.dtype_policy, name="output_projection"
            )

    def build(self, input_shape=None):
        batch = None
        source_shape, target_shape = (batch, None), (batch, None)
        if input_shape is not None and len(input_shape) == 2:
            source_shape, target_shape = input_shape
        hidden_source = (*source_shape, self.d_model)
        hidden_target = (*target_shape, self.d_model)
        # `encode`/`decode` may have built some sublayers already.
        builds = [
            (self.source_embedding, (source_shape,)),
            (self.target_embedding, (target_shape,)),
            (self.encoder, (hidden_source,)),
            (self.decoder, (hidden_target, hidden_source)),
        ]
        if self.output_projection is not None:
            builds.append((self.output_projection, (hidden_target,)))
        for layer, shapes in builds:
            if not layer.built:
                layer.build(*shapes)
        if self.output_bias and self.tie_output_embeddings and self.logits_bias is None:
            self.logits_bias = self.add_weight(
                shape=(self.target_vocab_size,), initializer="zeros", name="output_bias"
            )
        self.built = True

    logits_bias = None  # the tied projection's bias, with `output_bias=True`

    @classmethod
    def from_preset(cls, name, source_vocab_size, target_vocab_size, **overrides):
        """Builds a `Transformer` with the architecture of preset `name`.

        Presets (`keras_transformer.models.PRESETS`): `"tiny"` (2+2 layers,
        128 wide), `"small"` (3+3, 256, 4 heads, dff 1024), `"base"` and
        `"big"` (the paper's), and `"transformer_tiny"` (Wu et al., 2021:
        shared embeddings, for Multi30k). `overrides` replace any
        constructor argument.
        """
        config = preset_config(name)
        known = set(inspect.signature(cls.__init__).parameters)
        known -= {"self", "kwargs", "source_vocab_size", "target_vocab_size"}
        unknown = sorted(set(overrides) - known - {"name", "dtype", "trainable"})
        if unknown:
            raise ValueError(
                f"Unknown Transformer argument(s) {shown_names(unknown)}; "
                f"its arguments: {', '.join(sorted(known))}"
            )
        config.update(overrides)
        return cls(
            source_vocab_size=source_vocab_size,
            target_vocab_size=target_vocab_size,
            **config,
        )

    def encode(self, source_ids, training=None):
        """Encodes source ids `[batch, source_length]`.

        Returns:
            `[batch, source_length, d_model]`.
        """
        x = self.source_embedding(source_ids)
        x = self.embedding_dropout(x, training=training)
        return self.encoder(x, mask=ops.not_equal(source_ids, 0), training=training)

    def _logits(self, hidden, step=False, compiled=False):
        rows, restore = _rows.as_rows(hidden)  # one matmul, no tensordot
        if self.output_projection is not None:
            logits = self.output_projection(rows)
        elif not step:
            logits = self._tied_logits(rows, table_major=False)
        elif not compiled:
            # A step in a TensorFlow graph or eager: oneDNN copies the
            # transposed table at every `rows · Eᵀ`, whatever the row count.
            logits = self._tied_logits(rows, table_major=True)
        elif rows.shape[0] is not None:
            logits = self._tied_logits(rows, rows.shape[0] <= TABLE_MAJOR_MAX_ROWS)
        else:
            # Traced without its row count (the compiled export's programs):
            # XLA knows it when it compiles, and keeps one branch.
            logits = ops.cond(
                ops.shape(rows)[0] <= TABLE_MAJOR_MAX_ROWS,
                lambda: self._tied_logits(rows, table_major=True),
                lambda: self._tied_logits(rows, table_major=False),
            )
        # The softmax and loss need float32 under mixed precision.
        return ops.cast(restore(logits), "float32")

    def _tied_logits(self, rows, table_major):
        """`rows [n, d_model]` through the tied projection, `[n, vocab]`.

        `table_major`: compute `(E · rowsᵀ)ᵀ`, the table read as it is
        stored; for few rows `rows · Eᵀ` made XLA's dot kernels (YNNPACK)
        copy the whole transposed table at every step, as oneDNN does at
        any row count. XLA folds the transpose back into the dot unless an
        operation sits between: the bias does.
        """
        embeddings = ops.cast(self.target_embedding.embeddings, rows.dtype)
        if not table_major:
            logits = ops.matmul(rows, ops.transpose(embeddings))
            if self.logits_bias is not None:
                logits = logits + ops.cast(self.logits_bias, logits.dtype)
            return logits
        logits = ops.matmul(embeddings, ops.transpose(rows))  # [vocab, n]
        if self.logits_bias is not None:
            logits = logits + ops.cast(self.logits_bias, logits.dtype)[:, None]
        return ops.transpose(logits)

    def decode(
        self,
        target_ids,
        encoded,
        encoder_padding_mask=None,
        training=None,
        self_attention_cache=None,
        cross_attention_cache=None,
        cache_index=None,
        compiled=False,
    ):
        """Decodes target ids against an encoded source.

        Args:
            target_ids: `[batch, target_length]`; the first token sits at
                position `cache_index` (0 without a cache).
            encoded: `encode`'s output, or `None` when
                `cross_attention_cache` is given.
            encoder_padding_mask: `[batch, source_length]`, True on tokens,
                e.g. `source_ids != 0`.
            training: whether dropout is active.
            self_attention_cache: the decoder's self-attention cache
                (`Decoder.init_self_attention_cache`).
            cross_attention_cache: precomputed cross-attention keys and
                values (`Decoder.precompute_cross_attention_cache`).
            cache_index: position of `target_ids[:, 0]`.
            compiled: the call runs compiled (`tf.function(jit_compile=True)`,
                `jax.jit`): caches written in place, self-attention
                projections fused (see `MultiHeadAttention`). Off, what
                any TensorFlow graph runs (a plain SavedModel in TF Serving).

        Returns:
            Logits `[batch, target_length, target_vocab_size]`, or
            `(logits, self_attention_cache)` with a cache.
        """
        start = 0 if cache_index is None else cache_index
        x = self.target_embedding(target_ids, start_index=start)
        x = self.embedding_dropout(x, training=training)
        outputs = self.decoder(
            x,
            encoded,
            inputs_mask=ops.not_equal(target_ids, 0),
            encoder_outputs_mask=encoder_padding_mask,
            self_attention_cache=self_attention_cache,
            cross_attention_cache=cross_attention_cache,
            cache_index=cache_index,
            compiled=compiled,
            training=training,
        )
        if self_attention_cache is None:
            return self._logits(outputs)
        hidden, self_attention_cache = outputs
        return self._logits(hidden, step=True, compiled=compiled), self_attention_cache

    def call(self, inputs, training=None):
        source_ids, target_ids = inputs
        encoded = self.encode(source_ids, training=training)
        return self.decode(
            target_ids,
            encoded,
            encoder_padding_mask=ops.not_equal(source_ids, 0),
            training=training,
        )

    def init_decoding_state(self, source_ids, max_length, encoded=None):
        """Encodes the source and prepares the caches for `decode_step`.

        Args:
            source_ids: `[batch, source_length]`.
            max_length: number of target positions the cache holds.
            encoded: `encode(source_ids)`, when the caller has it already
                (e.g. encoded apart from the search, in groups of rows of
                similar length); by default the source is encoded here.

        Returns:
            A dict of tensors with leading dimension `batch`:
            `self_attention_cache`, one `(keys, values)` per decoder block,
            each `[batch, heads, max_length, head_dim]`;
            `cross_attention_cache`, the same with `source_length`
            positions; `encoder_mask` `[batch, source_length]`. A search
            may tile the self-attention caches over beams and leave the
            cross-attention caches and the mask untiled (the beams of a
            source share them, see `MultiHeadAttention`).
        """
        if not self.built:
            self.build(((None, None), (None, None)))
        if encoded is None:
            encoded = self.encode(source_ids, training=False)
        batch = ops.shape(source_ids)[0]
        return {
            "self_attention_cache": self.decoder.init_self_attention_cache(batch, max_length),
            "cross_attention_cache": self.decoder.precompute_cross_attention_cache(encoded),
            "encoder_mask": ops.not_equal(source_ids, 0),
        }

    def decode_step(self, ids, index, state, compiled=False):
        """One incremental decoding step, the `step_fn` of the searches.

        The one step of every decoding path: the plain export, the compiled
        export (`compiled=True`, under XLA) and JAX's `jit` run it.

        Args:
            ids: last tokens `[batch]`.
            index: 0-based position of `ids` in the target sequence.
            state: from `init_decoding_state` (possibly tiled over beams).
            compiled: the step runs compiled, see `decode`.

        Returns:
            `(logits [batch, target_vocab_size], new_state)`.
        """
        logits, cache = self.decode(
            ops.expand_dims(ids, 1),  # [batch, 1]
            None,
            encoder_padding_mask=state["encoder_mask"],
            training=False,
            self_attention_cache=state["self_attention_cache"],
            cross_attention_cache=state["cross_attention_cache"],
            cache_index=index,
            compiled=compiled,
        )
        return logits[:, 0, :], {**state, "self_attention_cache": cache}

    def cross_attention(self, source_ids, target_ids):
        """Last decoder block's cross-attention, averaged over heads.

        Args:
            source_ids: `[batch, source_length]`.
            target_ids: decoder inputs `[batch, target_length]` (start token
                first), e.g. a translation to explain.

        Returns:
            `[batch, target_length, source_length]` attention weights.
        """
        encoded = self.encode(source_ids, training=False)
        x = self.target_embedding(target_ids)
        _, scores = self.decoder(
            x,
            encoded,
            inputs_mask=ops.not_equal(target_ids, 0),
            encoder_outputs_mask=ops.not_equal(source_ids, 0),
            training=False,
            return_attention_scores=True,
        )
        return ops.mean(ops.cast(scores, "float32"), axis=1)

    def get_config(self):
        config = {
            "num_layers": self.num_layers,
            "num_decoder_layers": self.num_decoder_layers,
            "d_model": self.d_model,
            "num_heads": self.num_heads,
            "dff": self.dff,
            "decoder_num_heads": self.decoder_num_heads,
            "decoder_dff": self.decoder_dff,
            "source_vocab_size": self.source_vocab_size,
            "target_vocab_size": self.target_vocab_size,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "max_length": self.max_length,
            "norm_first": self.norm_first,
            "share_embeddings": self.share_embeddings,
            "activation": keras.activations.serialize(activations.get(self.activation)),
            "position_encoding": self.position_encoding,
            "position_layout": self.position_layout,
            "scale_embeddings": self.scale_embeddings,
            "tie_output_embeddings": self.tie_output_embeddings,
            "output_bias": self.output_bias,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            **weight_options_config(self),
            "seed": self.seed,
        }
        return {**super().get_config(), **config}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
