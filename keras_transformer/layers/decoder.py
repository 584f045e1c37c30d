"""A stack of decoder blocks with a cache for incremental decoding."""

import keras
from keras import ops

from keras_transformer.layers import _blocks
from keras_transformer.layers.decoder_block import DecoderBlock


def _layer_cache(cache, index):
    if cache is None:
        return None
    if isinstance(cache, (list, tuple)):
        return cache[index]
    return cache[:, index]


@keras.saving.register_keras_serializable(package="keras_transformer")
class Decoder(_blocks.StackLayer):
    """`num_layers` `DecoderBlock`s, with a final layer norm when pre-norm.

    The caches of all blocks are stacked into one tensor each, so that a
    search can tile and reorder them as one piece of state:
    self-attention `[batch, num_layers, 2, max_length, heads, head_dim]` from
    `init_cache`, cross-attention `[batch, num_layers, 2, source_length,
    heads, head_dim]` from `precompute_cross_cache`. Either may also be a
    list (or tuple) of the blocks' caches, e.g. `ops.unstack(cache, axis=1)`,
    and the self-attention cache is then returned as a list (tuple): a
    decoding loop that carries it so saves slicing and restacking the whole
    cache at every step.

    Args:
        num_layers: number of blocks.
        d_model, num_heads, dff, dropout, norm_first, activation,
            layer_norm_epsilon, kernel_initializer, bias_initializer: as in
            `DecoderBlock`.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `[batch, target_length, d_model]`.
        encoder_outputs: `[batch, source_length, d_model]` or `None`.
        inputs_mask, encoder_outputs_mask: padding masks, filled by Keras.
        attention_mask: extra self-attention mask, see `DecoderBlock`.
        cache: stacked self-attention cache; then `cache_index` is required
            and the call returns `(outputs, cache)`.
        cross_cache: stacked cross-attention cache.
        cache_index: position of `inputs[:, 0]`.
        training: whether dropout is active.

    Returns:
        `[batch, target_length, d_model]`, or `(outputs, cache)`.

    Example:

    >>> decoder = Decoder(2, d_model=16, num_heads=2, dff=32)
    >>> decoder(keras.ops.ones((1, 3, 16)), keras.ops.ones((1, 5, 16))).shape
    (1, 3, 16)
    """

    def build(self, inputs_shape, encoder_outputs_shape=None):
        self.blocks = []
        for i in range(self.num_layers):
            block = DecoderBlock(
                self.d_model,
                self.num_heads,
                self.dff,
                name=f"block_{i}",
                **self.block_options(),
            )
            block.build(inputs_shape, encoder_outputs_shape)
            self.blocks.append(block)
        self.final_norm = None
        if self.norm_first:
            self.final_norm = _blocks.layer_norm(self, "final_norm")
            self.final_norm.build(inputs_shape)

    def init_cache(self, batch_size, max_length):
        """Empty stacked self-attention cache."""
        caches = [block.init_cache(batch_size, max_length) for block in self.blocks]
        return ops.stack(caches, axis=1)

    def precompute_cross_cache(self, encoder_outputs):
        """Encoder keys and values of every block, projected once."""
        caches = [block.precompute_cross_cache(encoder_outputs) for block in self.blocks]
        return ops.stack(caches, axis=1)

    def cross_attention_scores(
        self, inputs, encoder_outputs, inputs_mask=None, encoder_outputs_mask=None
    ):
        """Cross-attention weights of the last block, `[batch, heads, t, s]`."""
        x = inputs
        for block in self.blocks[:-1]:
            x = block(
                x,
                encoder_outputs,
                inputs_mask=inputs_mask,
                encoder_outputs_mask=encoder_outputs_mask,
            )
        return self.blocks[-1].cross_attention_scores(
            x, encoder_outputs, inputs_mask, encoder_outputs_mask
        )

    def call(
        self,
        inputs,
        encoder_outputs=None,
        inputs_mask=None,
        encoder_outputs_mask=None,
        attention_mask=None,
        cache=None,
        cross_cache=None,
        cache_index=None,
        training=None,
    ):
        x = inputs
        new_caches = []
        for i, block in enumerate(self.blocks):
            outputs = block(
                x,
                encoder_outputs,
                inputs_mask=inputs_mask,
                encoder_outputs_mask=encoder_outputs_mask,
                attention_mask=attention_mask,
                self_attention_cache=_layer_cache(cache, i),
                cross_attention_cache=_layer_cache(cross_cache, i),
                cache_index=cache_index,
                training=training,
            )
            if cache is None:
                x = outputs
            else:
                x, block_cache = outputs
                new_caches.append(block_cache)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if cache is None:
            return x
        if isinstance(cache, (list, tuple)):
            return x, type(cache)(new_caches)
        return x, ops.stack(new_caches, axis=1)
