"""One encoder block: self-attention and feed-forward."""

import keras

from keras_transformer.layers import _blocks


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderBlock(_blocks.BlockLayer):
    """Self-attention then feed-forward, each with residual, dropout and norm.

    Post-norm (`norm_first=False`, the paper): `x = norm(x + drop(f(x)))`.
    Pre-norm (`norm_first=True`): `x = x + drop(f(norm(x)))`, which trains
    deep stacks without warmup tricks. Padding is honoured through the Keras
    mask of the input (set by `PositionalEmbedding`) or an explicit mask.

    Args:
        d_model: model width; `d_model % num_heads == 0`.
        num_heads: number of attention heads.
        dff: hidden size of the feed-forward network.
        dropout: dropout rate of the residual branches (the sublayers'
            outputs).
        norm_first: pre-norm instead of post-norm.
        activation: feed-forward activation.
        layer_norm_epsilon: epsilon of the layer norms (1e-6, as tensor2tensor).
        kernel_initializer: initializer of every projection and dense kernel.
        bias_initializer: initializer of every projection and dense bias.
        attention_dropout: dropout rate of the attention weights; `None`
            (default) uses `dropout`, as the paper. fairseq's recipes use 0.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `[batch, length, d_model]`.
        mask: padding mask `[batch, length]`, True on tokens; Keras fills it
            from the input's mask.
        attention_mask: explicit boolean `[batch, length, length]`.
        training: whether dropout is active.
        inputs_mask: the same padding mask as `mask`, under the name Keras
            uses when `attention_mask` is a tensor too.
        return_attention_scores: also return the self-attention weights
            `[batch, heads, length, length]` (as keras-hub's
            `TransformerEncoder`).

    Returns:
        `[batch, length, d_model]`, carrying the input's mask; with
        `return_attention_scores`, `(outputs, scores)`.

    Example:

    >>> block = EncoderBlock(d_model=16, num_heads=2, dff=32)
    >>> tuple(block(keras.ops.ones((2, 5, 16))).shape)
    (2, 5, 16)
    >>> _, scores = block(keras.ops.ones((2, 5, 16)), return_attention_scores=True)
    >>> tuple(scores.shape)
    (2, 2, 5, 5)
    """

    def build(self, input_shape):
        _blocks.check_input_depth(self, input_shape)
        self.self_attention = self._make_attention("self_attention")
        self.self_attention.build(input_shape, input_shape)
        self.self_attention_norm = _blocks.layer_norm(self, "self_attention_norm")
        self.self_attention_norm.build(input_shape)
        self.self_attention_dropout = _blocks.dropout(self, "self_attention_dropout")
        self._build_feed_forward(input_shape)

    def call(
        self,
        inputs,
        mask=None,
        attention_mask=None,
        training=None,
        inputs_mask=None,
        return_attention_scores=False,
    ):
        # Keras fills `inputs_mask` instead of `mask` when `attention_mask`
        # is a tensor too.
        padding_mask = mask if mask is not None else inputs_mask

        def attend(x):
            y = self.self_attention(
                x,
                x,
                attention_mask=attention_mask,
                training=training,
                query_mask=padding_mask,
                value_mask=padding_mask,
                return_attention_scores=return_attention_scores,
            )
            return y if return_attention_scores else (y, None)

        x, scores = _blocks.residual(
            inputs,
            attend,
            self.self_attention_norm,
            self.self_attention_dropout,
            self.norm_first,
            training,
        )
        x = self._feed_forward_residual(x, training)
        return (x, scores) if return_attention_scores else x
