"""One table of weights per architecture: our path, their name, the transform.

A converter walks a table instead of the layers' insides: each row names a
variable of ours by its path through public sublayers and the layers'
`weights_by_role()` (`encoder.blocks.0.self_attention.query_kernel`), the other
toolkit's tensor, and how one's layout becomes the other's. Marian's
importer and exporter read the same rows, one each way; renaming a
layer's private attribute breaks no converter.

The vocabulary tables (the embeddings, the output projection and its bias)
are not rows: their ids are reordered, added or tied as each direction
needs (see `interop.marian` and `export.marian`).

Example:

>>> from keras_transformer.models import Transformer
>>> model = Transformer(num_layers=1, d_model=8, num_heads=2, dff=16,
...                     source_vocab_size=10, target_vocab_size=10)
>>> model.build(((None, None), (None, None)))
>>> row = marian_rows(model)[0]
>>> row.ours
'encoder.blocks.0.self_attention.query_kernel'
>>> row.theirs
'model.encoder.layers.0.self_attn.q_proj.weight'
>>> tuple(to_theirs(row, resolve(model, row.ours), np.arange(8)).shape)
(8, 8)
"""

import typing

import numpy as np


class Row(typing.NamedTuple):
    """One variable of ours and the other toolkit's tensor."""

    ours: str  # the variable's path through public sublayers
    theirs: str  # the other toolkit's tensor name
    transform: str  # a key of `TRANSFORMS`


def resolve(root, path):
    """The object at a dotted `path` from `root`: `blocks.0` indexes a list,
    and a layer's `weights_by_role()` names its variables
    (`self_attention.query_kernel`).

    Raises:
        ValueError: no such object, naming the path.
    """
    value = root
    for part in path.split("."):
        roles = value.weights_by_role() if hasattr(value, "weights_by_role") else {}
        if part.isdigit():
            value = value[int(part)]
        elif part in roles:
            value = roles[part]
        elif hasattr(value, part) and not part.startswith("_"):
            value = getattr(value, part)
        else:
            raise ValueError(f"{path}: {type(value).__name__} has no {part!r}")
    return value


# Each transform: (ours -> theirs, theirs -> ours given our shape), with
# `order` the permutation of the model width that puts ours in their
# layout (their feature `j` is our feature `order[j]`) and `back` its inverse.
TRANSFORMS = {
    # A query, key or value kernel: ours `[d, heads, head_dim]`, theirs
    # `[heads * head_dim, d]` (PyTorch's `[out, in]`).
    "in_projection": (
        lambda w, order: w.reshape(w.shape[0], -1).T[:, order],
        lambda t, shape, back: t[:, back].T.reshape(shape),
    ),
    # Its bias: ours `[heads, head_dim]`, theirs flat.
    "heads_bias": (
        lambda w, order: w.reshape(-1),
        lambda t, shape, back: t.reshape(shape),
    ),
    # The output kernel: ours `[heads, head_dim, d]`, theirs `[d, heads * head_dim]`.
    "out_projection": (
        lambda w, order: w.reshape(-1, w.shape[-1]).T[order],
        lambda t, shape, back: t[back].T.reshape(shape),
    ),
    # A dense kernel into the model width: ours `[inner, d]`, theirs `[d, inner]`.
    "into_width": (
        lambda w, order: w.T[order],
        lambda t, shape, back: t[back].T,
    ),
    # A dense kernel out of the model width: ours `[d, inner]`, theirs `[inner, d]`.
    "from_width": (
        lambda w, order: w.T[:, order],
        lambda t, shape, back: t[:, back].T,
    ),
    # A vector over the model width (a bias, a layer norm's gain or offset).
    "width": (
        lambda w, order: w[order],
        lambda t, shape, back: t[back],
    ),
    # A vector over something else (the feed-forward's hidden units).
    "same": (
        lambda w, order: w,
        lambda t, shape, back: t,
    ),
}

_MARIAN_ATTENTION = (
    ("query_kernel", "q_proj.weight", "in_projection"),
    ("query_bias", "q_proj.bias", "heads_bias"),
    ("key_kernel", "k_proj.weight", "in_projection"),
    ("key_bias", "k_proj.bias", "heads_bias"),
    ("value_kernel", "v_proj.weight", "in_projection"),
    ("value_bias", "v_proj.bias", "heads_bias"),
    ("output_kernel", "out_proj.weight", "out_projection"),
    ("output_bias", "out_proj.bias", "width"),
)
_MARIAN_NORM = (("gamma", "weight", "width"), ("beta", "bias", "width"))
_MARIAN_FEED_FORWARD = (
    ("feed_forward.intermediate_kernel", "fc1.weight", "from_width"),
    ("feed_forward.intermediate_bias", "fc1.bias", "same"),
    ("feed_forward.output_kernel", "fc2.weight", "into_width"),
    ("feed_forward.output_bias", "fc2.bias", "width"),
)
# Our sublayers of a block and Marian's, each with its rows.
_MARIAN_BLOCK = (
    ("self_attention", "self_attn", _MARIAN_ATTENTION),
    ("self_attention_norm", "self_attn_layer_norm", _MARIAN_NORM),
    ("cross_attention", "encoder_attn", _MARIAN_ATTENTION),
    ("cross_attention_norm", "encoder_attn_layer_norm", _MARIAN_NORM),
    ("feed_forward_norm", "final_layer_norm", _MARIAN_NORM),
)


def marian_rows(model):
    """The rows of a `Transformer` Marian can express (post-norm): every
    variable of its encoder and decoder blocks; the vocabulary tables are
    the converters' (see the module's docstring)."""
    rows = []
    for stack, theirs_stack in (("encoder", "encoder"), ("decoder", "decoder")):
        for i, block in enumerate(resolve(model, stack).blocks):
            ours_prefix = f"{stack}.blocks.{i}."
            theirs_prefix = f"model.{theirs_stack}.layers.{i}."
            for ours, theirs, table in _MARIAN_BLOCK:
                if getattr(block, ours, None) is None:  # no cross-attention here
                    continue
                for part_ours, part_theirs, transform in table:
                    rows.append(Row(f"{ours_prefix}{ours}.{part_ours}",
                                    f"{theirs_prefix}{theirs}.{part_theirs}",
                                    transform))  # fmt: skip
            for part_ours, part_theirs, transform in _MARIAN_FEED_FORWARD:
                rows.append(Row(ours_prefix + part_ours, theirs_prefix + part_theirs, transform))
    return rows


def to_theirs(row, variable, order):
    """`variable` (ours) as the other toolkit's tensor of `row`, float32.

    `order`: the permutation of the model width into their layout
    (`numpy.arange(d_model)` where the layouts agree)."""
    array = np.asarray(variable, dtype=np.float32)
    return np.ascontiguousarray(TRANSFORMS[row.transform][0](array, np.asarray(order)))


def to_ours(row, tensor, variable, order):
    """Assigns the other toolkit's `tensor` of `row` to `variable` (ours),
    in our layout; `order` as `to_theirs`'.

    Raises:
        ValueError: the tensor's shape does not fit the variable's.
    """
    tensor = np.asarray(tensor, dtype=np.float32)
    shape = tuple(variable.shape)
    try:
        value = TRANSFORMS[row.transform][1](tensor, shape, np.argsort(order))
    except (ValueError, IndexError):
        value = None
    if value is None or tuple(value.shape) != shape:
        raise ValueError(
            f"{row.theirs}: shape {tuple(tensor.shape)} does not fit {row.ours} {shape}"
        )
    variable.assign(value)
