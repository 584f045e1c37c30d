"""A stack of decoder blocks with a cache for incremental decoding."""

import keras

from keras_transformer.layers import _blocks
from keras_transformer.layers.decoder_block import DecoderBlock


@keras.saving.register_keras_serializable(package="keras_transformer")
class Decoder(_blocks.CrossAttentionOption, _blocks.StackLayer):
    """`num_layers` `DecoderBlock`s, with a final layer norm when pre-norm.

    The caches are tuples with one entry per block, each the block's keys
    and values `[batch, heads, length, head_dim]`: self-attention from
    `init_self_attention_cache`, cross-attention from
    `precompute_cross_attention_cache`. A search tiles and reorders them
    as one nested structure, and a step writes each block's cache without
    slicing or restacking the others.

    Args:
        num_layers: number of blocks.
        d_model, num_heads, dff, dropout, norm_first, activation,
            layer_norm_epsilon, kernel_initializer, bias_initializer,
            attention_dropout, kernel_regularizer, bias_regularizer,
            kernel_constraint, bias_constraint, seed,
            with_cross_attention: as in `DecoderBlock` (built without an
            encoder sequence, the stack is decoder-only).
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `[batch, target_length, d_model]`.
        encoder_outputs: `[batch, source_length, d_model]` or `None`.
        inputs_mask, encoder_outputs_mask: padding masks, filled by Keras.
        attention_mask: extra self-attention mask, see `DecoderBlock`.
        cross_attention_mask: extra cross-attention mask, see `DecoderBlock`.
        self_attention_cache: the blocks' self-attention caches; then
            `cache_index` is required and the call returns
            `(outputs, self_attention_cache)`.
        cross_attention_cache: the blocks' cross-attention caches.
        cache_index: position of `inputs[:, 0]`.
        compiled: the call runs compiled, see `DecoderBlock`.
        training: whether dropout is active.
        return_attention_scores: also return the last block's
            cross-attention weights `[batch, heads, target_length,
            source_length]`.

    Returns:
        `[batch, target_length, d_model]`, or `(outputs,
        self_attention_cache)`; either
        followed by the cross-attention weights when
        `return_attention_scores=True`.

    Example:

    >>> decoder = Decoder(2, d_model=16, num_heads=2, dff=32)
    >>> tuple(decoder(keras.ops.ones((1, 3, 16)), keras.ops.ones((1, 5, 16))).shape)
    (1, 3, 16)
    """

    def block_options(self, index=0):
        return {**super().block_options(index), "with_cross_attention": self.with_cross_attention}

    def build(self, inputs_shape, encoder_outputs_shape=None):
        self._build_stack(DecoderBlock, inputs_shape, encoder_outputs_shape)

    def init_self_attention_cache(self, batch_size, max_length):
        """Empty self-attention caches, one `(keys, values)` per block."""
        return tuple(
            block.init_self_attention_cache(batch_size, max_length) for block in self.blocks
        )

    def precompute_cross_attention_cache(self, encoder_outputs):
        """Encoder keys and values of every block, projected once."""
        return tuple(
            block.precompute_cross_attention_cache(encoder_outputs) for block in self.blocks
        )

    def cross_attention_scores(
        self, inputs, encoder_outputs, inputs_mask=None, encoder_outputs_mask=None
    ):
        """Cross-attention weights of the last block, `[batch, heads, t, s]`
        (inference mode); the same as `call(..., return_attention_scores=True)[1]`."""
        _, scores = self(
            inputs,
            encoder_outputs,
            inputs_mask=inputs_mask,
            encoder_outputs_mask=encoder_outputs_mask,
            training=False,
            return_attention_scores=True,
        )
        return scores

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
        cache, cross_cache = self_attention_cache, cross_attention_cache
        x = inputs
        new_caches = []
        scores = None
        for i, block in enumerate(self.blocks):
            # Only the last block's alignment is returned, as the paper plots it.
            with_scores = return_attention_scores and i == self.num_layers - 1
            outputs = block(
                x,
                encoder_outputs,
                inputs_mask=inputs_mask,
                encoder_outputs_mask=encoder_outputs_mask,
                attention_mask=attention_mask,
                cross_attention_mask=cross_attention_mask,
                self_attention_cache=None if cache is None else cache[i],
                cross_attention_cache=None if cross_cache is None else cross_cache[i],
                cache_index=cache_index,
                compiled=compiled,
                training=training,
                return_attention_scores=with_scores,
            )
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            x = outputs[0]
            if cache is not None:
                new_caches.append(outputs[1])
            if with_scores:
                scores = outputs[-1]
        if self.final_norm is not None:
            x = self.final_norm(x)
        results = (x,)
        if cache is not None:
            results += (tuple(new_caches),)
        if return_attention_scores:
            results += (scores,)
        return results[0] if len(results) == 1 else results
