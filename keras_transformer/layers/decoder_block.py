"""One decoder block: causal self-attention, cross-attention, feed-forward."""

import keras

from keras_transformer.layers import _blocks


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderBlock(_blocks.CrossAttentionOption, _blocks.BlockLayer):
    """Causal self-attention, cross-attention and feed-forward.

    Each sublayer has a residual connection, dropout and layer norm, post-norm
    as in the paper or pre-norm (`norm_first=True`). Cross-attention honours
    the encoder output's padding mask and an explicit `cross_attention_mask`.

    Built without an encoder sequence (its first call has no
    `encoder_outputs`), the block is a decoder-only (language model) block,
    as keras-hub's `TransformerDecoder`: no cross-attention, no weights or
    cache for it, and an encoder sequence given later is refused.
    `with_cross_attention=True` builds it whatever the first call
    (what blocks saved before this option did, and still do).

    Incremental decoding: pass `self_attention_cache` (from
    `init_self_attention_cache`) and `cache_index`; the block then returns
    `(outputs, self_attention_cache)`. `cross_attention_cache` (from
    `precompute_cross_attention_cache`) saves projecting the encoder output
    at every step.

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
        kernel_regularizer, bias_regularizer, kernel_constraint,
            bias_constraint: of every projection and dense layer.
        seed: seed of the dropouts (each sublayer its own offset).
        with_cross_attention: None (default): cross-attention when the
            block is built with an encoder sequence; True: always; False:
            never (decoder-only).
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `[batch, target_length, d_model]`.
        encoder_outputs: `[batch, source_length, d_model]` or `None`.
        inputs_mask: target padding mask `[batch, target_length]`; Keras
            fills it from the input's mask.
        encoder_outputs_mask: source padding mask `[batch, source_length]`;
            Keras fills it from the encoder output's mask.
        attention_mask: extra boolean `[batch, target_length, target_length]`
            mask for self-attention, merged with the causal mask.
        cross_attention_mask: extra boolean `[batch, target_length,
            source_length]` mask for cross-attention, merged with the
            encoder output's padding mask.
        self_attention_cache: keys and values `[batch, heads, max_length,
            head_dim]` (`init_self_attention_cache`).
        cross_attention_cache: keys and values `[batch, heads,
            source_length, head_dim]`; they may have fewer rows than
            `inputs`, each shared by consecutive rows (a source's beams):
            see `MultiHeadAttention`.
        cache_index: position of `inputs[:, 0]` in the sequence.
        compiled: the call runs compiled (XLA, `jax.jit`): the
            self-attention cache is written in place and its projections
            fused (see `MultiHeadAttention`); off, what any TensorFlow graph
            runs.
        training: whether dropout is active.
        return_attention_scores: also return the cross-attention weights
            `[batch, heads, target_length, source_length]` (as keras-hub's
            `TransformerDecoder`), e.g. to plot an alignment.

    Returns:
        `[batch, target_length, d_model]`; `(outputs, self_attention_cache)`
        when a self-attention cache is given; either followed by the
        cross-attention weights when `return_attention_scores=True`.

    Example:

    >>> block = DecoderBlock(d_model=16, num_heads=2, dff=32)
    >>> tuple(block(keras.ops.ones((2, 4, 16)), keras.ops.ones((2, 6, 16))).shape)
    (2, 4, 16)
    >>> outputs, scores = block(
    ...     keras.ops.ones((2, 4, 16)), keras.ops.ones((2, 6, 16)), return_attention_scores=True
    ... )
    >>> tuple(scores.shape)
    (2, 2, 4, 6)
    """

    def build(self, inputs_shape, encoder_outputs_shape=None):
        _blocks.check_input_depth(self, inputs_shape)
        self.self_attention = self._make_attention("self_attention")
        self.self_attention.build(inputs_shape, inputs_shape)
        self.self_attention_norm = _blocks.layer_norm(self, "self_attention_norm")
        self.self_attention_norm.build(inputs_shape)
        self.self_attention_dropout = _blocks.dropout(self, "self_attention_dropout")
        cross = self.with_cross_attention
        if cross is None:
            cross = encoder_outputs_shape is not None
        self.cross_attention = self.cross_attention_norm = self.cross_attention_dropout = None
        if cross:
            self.cross_attention = self._make_attention("cross_attention")
            self.cross_attention.build(inputs_shape, encoder_outputs_shape or inputs_shape)
            self.cross_attention_norm = _blocks.layer_norm(self, "cross_attention_norm")
            self.cross_attention_norm.build(inputs_shape)
            self.cross_attention_dropout = _blocks.dropout(self, "cross_attention_dropout")
        self._build_feed_forward(inputs_shape)

    def _check_cross_attention(self):
        if self.cross_attention is None:
            raise ValueError(
                f"Layer '{self.name}' was built without cross-attention (decoder-only: no "
                "encoder sequence when it was built); it takes no `encoder_outputs` or "
                "cross-attention cache. Build it with one, or with with_cross_attention=True"
            )

    def init_self_attention_cache(self, batch_size, max_length):
        """Empty self-attention keys and values `[batch, heads, max_length, head_dim]`."""
        return self.self_attention.init_cache(batch_size, max_length)

    def precompute_cross_attention_cache(self, encoder_outputs):
        """Projected encoder keys and values, `[batch, heads, source_length, head_dim]`."""
        self._check_cross_attention()
        return self.cross_attention.precompute_cache(encoder_outputs)

    def call(
        self,
        inputs,
        encoder_outputs=None,
        inputs_mask=None,
        encoder_outputs_mask=None,
        attention_mask=None,
        self_attention_cache=None,
        cross_attention_cache=None,
        cache_index=None,
        compiled=False,
        training=None,
        return_attention_scores=False,
        cross_attention_mask=None,
    ):
        if self_attention_cache is not None and cache_index is None:
            raise ValueError(
                "`cache_index` is required with `self_attention_cache`. Received: cache_index=None"
            )
        has_memory = encoder_outputs is not None or cross_attention_cache is not None
        if has_memory:
            self._check_cross_attention()
        if return_attention_scores and not has_memory:
            raise ValueError(
                "`return_attention_scores=True` returns the cross-attention weights and "
                "needs `encoder_outputs` (or `cross_attention_cache`)"
            )

        def self_attend(x):
            if self_attention_cache is None:
                y = self.self_attention(
                    x,
                    x,
                    attention_mask=attention_mask,
                    use_causal_mask=True,
                    training=training,
                    query_mask=inputs_mask,
                    value_mask=inputs_mask,
                )
                return y, None
            return self.self_attention(
                x,
                x,
                attention_mask=attention_mask,
                use_causal_mask=True,
                training=training,
                cache=self_attention_cache,
                cache_index=cache_index,
                compiled=compiled,
                query_mask=inputs_mask,
            )

        def cross_attend(x):
            outputs = self.cross_attention(
                x,
                encoder_outputs,
                attention_mask=cross_attention_mask,
                training=training,
                cache=cross_attention_cache,
                query_mask=inputs_mask,
                value_mask=encoder_outputs_mask,
                return_attention_scores=return_attention_scores,
            )
            if not isinstance(outputs, (tuple, list)):
                return outputs, None
            # (y, scores), (y, cache) or (y, scores, cache): the cross
            # cache is not updated, so only the scores travel on.
            return outputs[0], (outputs[1] if return_attention_scores else None)

        x, cache = _blocks.residual(
            inputs,
            self_attend,
            self.self_attention_norm,
            self.self_attention_dropout,
            self.norm_first,
            training,
        )
        scores = None
        if has_memory:
            x, scores = _blocks.residual(
                x,
                cross_attend,
                self.cross_attention_norm,
                self.cross_attention_dropout,
                self.norm_first,
                training,
            )
        x = self._feed_forward_residual(x, training)
        outputs = (x,)
        if self_attention_cache is not None:
            outputs += (cache,)
        if return_attention_scores:
            outputs += (scores,)
        return outputs[0] if len(outputs) == 1 else outputs

    def cross_attention_scores(
        self, inputs, encoder_outputs, inputs_mask=None, encoder_outputs_mask=None
    ):
        """The cross-attention weights `[batch, heads, target_length,
        source_length]` of this block for `inputs` (inference mode); the
        same as `call(..., return_attention_scores=True)[1]`."""
        _, scores = self(
            inputs,
            encoder_outputs,
            inputs_mask=inputs_mask,
            encoder_outputs_mask=encoder_outputs_mask,
            training=False,
            return_attention_scores=True,
        )
        return scores
