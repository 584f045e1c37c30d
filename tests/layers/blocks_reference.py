"""NumPy encoder and decoder blocks built from `tests.reference`."""

import numpy as np

from tests import reference


def _sublayer(x, f, norm, norm_first):
    gamma, beta = (np.array(w, np.float64) for w in norm.get_weights())
    if norm_first:
        return x + f(reference.layer_norm(x, gamma, beta))
    return reference.layer_norm(x + f(x), gamma, beta)


def _ffn(block):
    w1, b1, w2, b2 = block.feed_forward.get_weights()
    return lambda x: reference.feed_forward(x, w1, b1, w2, b2)


def encoder_block(block, x, padding):
    x = x.astype(np.float64)
    mask = padding[:, :, None] & padding[:, None, :]
    w = reference.mha_weights(block.self_attention)
    x = _sublayer(
        x, lambda h: reference.mha(h, h, w, mask), block.self_attention_norm, block.norm_first
    )
    return _sublayer(x, _ffn(block), block.feed_forward_norm, block.norm_first)


def decoder_block(block, x, memory, target_padding, source_padding, return_scores=False):
    """The block's outputs; with `return_scores`, also its cross-attention
    weights `[batch, heads, t, s]`."""
    x, memory = x.astype(np.float64), memory.astype(np.float64)
    t = x.shape[1]
    self_mask = (
        target_padding[:, :, None]
        & target_padding[:, None, :]
        & np.tril(np.ones((t, t), bool))[None]
    )
    cross_mask = target_padding[:, :, None] & source_padding[:, None, :]
    ws = reference.mha_weights(block.self_attention)
    wc = reference.mha_weights(block.cross_attention)
    x = _sublayer(
        x, lambda h: reference.mha(h, h, ws, self_mask), block.self_attention_norm, block.norm_first
    )
    queries = []

    def cross(h):
        queries.append(h)
        return reference.mha(h, memory, wc, cross_mask)

    x = _sublayer(x, cross, block.cross_attention_norm, block.norm_first)
    outputs = _sublayer(x, _ffn(block), block.feed_forward_norm, block.norm_first)
    if not return_scores:
        return outputs
    return outputs, reference.mha_probs(queries[0], memory, wc, cross_mask)
