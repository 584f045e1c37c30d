"""NumPy implementations of the paper's formulas: the tests' oracle.

Written from "Attention Is All You Need" independently of the package code;
weights are read out of the Keras layers by name.
"""

import numpy as np


def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def layer_norm(x, gamma, beta, eps=1e-6):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def weights_by_name(layer):
    return {
        w.path.split("/", 1)[1] if "/" in w.path else w.path: np.array(w) for w in layer.weights
    }


def mha_probs(query, value, w, mask=None):
    """The attention weights `[batch, heads, Tq, Tk]` of `mha`."""
    q = np.einsum("btd,dnh->btnh", query, w["query_kernel"]) + w["query_bias"]
    k = np.einsum("bsd,dnh->bsnh", value, w["key_kernel"]) + w["key_bias"]
    logits = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
    if mask is None:
        return softmax(logits)
    m = mask[:, None]
    return np.where(m, softmax(np.where(m, logits, -1e30)), 0.0)


def mha(query, value, w, mask=None):
    """w: dict with query/key/value/attention_output kernels and biases.

    mask: [batch, Tq, Tk] bool, True = attend. Fully masked rows attend to
    nothing.
    """
    probs = mha_probs(query, value, w, mask)
    v = np.einsum("bsd,dnh->bsnh", value, w["value_kernel"]) + w["value_bias"]
    ctx = np.einsum("bnts,bsnh->btnh", probs, v)
    return np.einsum("btnh,nhd->btd", ctx, w["output_kernel"]) + w["output_bias"]


def mha_weights(layer):
    """Reads the weights of a MultiHeadAttention layer (either package)."""
    names = [
        "query_kernel",
        "query_bias",
        "key_kernel",
        "key_bias",
        "value_kernel",
        "value_bias",
        "output_kernel",
        "output_bias",
    ]
    return dict(zip(names, [np.array(w, dtype=np.float64) for w in layer.get_weights()]))


def feed_forward(x, w1, b1, w2, b2):
    return np.maximum(x @ w1 + b1, 0.0) @ w2 + b2


def position_encoding(length, depth):
    pe = np.zeros((length, depth))
    for pos in range(length):
        for k in range(depth):
            i = k // 2
            angle = pos / 10000 ** (2 * i / depth)
            pe[pos, k] = np.sin(angle) if k % 2 == 0 else np.cos(angle)
    return pe


def paper_learning_rate(step_number, d_model, warmup, scale=1.0):
    """Section 5.3: `d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`,
    `step_number` counted from 1."""
    return scale * d_model**-0.5 * min(step_number**-0.5, step_number * warmup**-1.5)


def inverse_sqrt_learning_rate(step_number, peak, warmup):
    """fairseq's `inverse_sqrt` scheduler from a zero initial rate."""
    return peak * min(step_number / warmup, (warmup / step_number) ** 0.5)
