"""The one place where attention masks are built and merged.

Every mask in this package is boolean and `True` means "may attend". Padding
masks are `[batch, length]` (`True` on real tokens); the merged attention mask
is `[batch, query_length, key_length]`.
"""

from keras import ops


def causal_attention_mask(query_length, key_length, query_offset=0):
    """Lower-triangular mask: query `i` sees keys `j <= i + query_offset`.

    Args:
        query_length: number of query positions (int or scalar tensor).
        key_length: number of key positions (int or scalar tensor).
        query_offset: absolute position of the first query, used when the
            queries continue a cached prefix.

    Returns:
        A boolean tensor of shape `[1, query_length, key_length]`.
    """
    rows = ops.expand_dims(ops.arange(query_length, dtype="int32"), -1)
    rows = rows + ops.cast(query_offset, "int32")
    cols = ops.expand_dims(ops.arange(key_length, dtype="int32"), 0)
    return ops.expand_dims(ops.greater_equal(rows, cols), 0)


def merge_attention_masks(
    query_mask=None,
    value_mask=None,
    key_mask=None,
    attention_mask=None,
    causal_mask=None,
):
    """Merges padding, explicit and causal masks into one attention mask.

    Args:
        query_mask: `[batch, query_length]` padding mask of the queries.
        value_mask: `[batch, key_length]` padding mask of the values.
        key_mask: `[batch, key_length]` padding mask of the keys.
        attention_mask: `[batch, query_length, key_length]` explicit mask.
        causal_mask: `[1, query_length, key_length]`, see
            `causal_attention_mask`.

    Returns:
        A boolean `[batch, query_length, key_length]` mask (broadcastable
        where only some inputs are given), or `None` when no mask is given.
    """
    padding = (2, "[batch, length]")
    for name, mask, (rank, layout) in (
        ("query_mask", query_mask, padding),
        ("value_mask", value_mask, padding),
        ("key_mask", key_mask, padding),
        ("attention_mask", attention_mask, (3, "[batch, query_length, key_length]")),
    ):
        if mask is not None and len(mask.shape) != rank:
            raise ValueError(
                f"`{name}` must be {layout}. Received: a mask of shape {tuple(mask.shape)}"
            )
    merged = None

    def _and(current, mask):
        mask = ops.cast(mask, "bool")
        return mask if current is None else ops.logical_and(current, mask)

    if query_mask is not None:
        merged = _and(merged, ops.expand_dims(query_mask, -1))
    if value_mask is not None:
        merged = _and(merged, ops.expand_dims(value_mask, -2))
    if key_mask is not None:
        merged = _and(merged, ops.expand_dims(key_mask, -2))
    if causal_mask is not None:
        merged = _and(merged, causal_mask)
    if attention_mask is not None:
        merged = _and(merged, attention_mask)
    return merged
