"""A stack of encoder blocks."""

import keras

from keras_transformer.layers import _blocks
from keras_transformer.layers.encoder_block import EncoderBlock


@keras.saving.register_keras_serializable(package="keras_transformer")
class Encoder(_blocks.StackLayer):
    """`num_layers` `EncoderBlock`s, with a final layer norm when pre-norm.

    Takes embedded inputs (e.g. from `PositionalEmbedding`); the padding mask
    arrives through Keras mask propagation or as `mask`.

    Args:
        num_layers: number of blocks.
        d_model, num_heads, dff, dropout, norm_first, activation,
            layer_norm_epsilon, kernel_initializer, bias_initializer,
            attention_dropout: as in `EncoderBlock`.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `[batch, length, d_model]`.
        mask: padding mask `[batch, length]`.
        attention_mask: explicit boolean `[batch, length, length]`.
        training: whether dropout is active.
        inputs_mask: the same padding mask as `mask`, under the name Keras
            uses when `attention_mask` is a tensor too.
        return_attention_scores: also return the last block's
            self-attention weights `[batch, heads, length, length]`.

    Returns:
        `[batch, length, d_model]`, carrying the input's mask; with
        `return_attention_scores`, `(outputs, scores)`.

    Example:

    >>> encoder = Encoder(2, d_model=16, num_heads=2, dff=32)
    >>> tuple(encoder(keras.ops.ones((1, 3, 16))).shape)
    (1, 3, 16)
    """

    def build(self, input_shape):
        self._build_stack(EncoderBlock, input_shape)

    def call(
        self,
        inputs,
        mask=None,
        attention_mask=None,
        training=None,
        inputs_mask=None,
        return_attention_scores=False,
    ):
        padding_mask = mask if mask is not None else inputs_mask
        x, scores = inputs, None
        for i, block in enumerate(self.blocks):
            # The last block's weights, as the decoder returns its last.
            with_scores = return_attention_scores and i == self.num_layers - 1
            x = block(x, mask=padding_mask, attention_mask=attention_mask, training=training,
                      return_attention_scores=with_scores)  # fmt: skip
            if with_scores:
                x, scores = x
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (x, scores) if return_attention_scores else x
