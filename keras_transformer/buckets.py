"""Length buckets of token-budget batching, for any input pipeline.

TensorFlow-free, so that the tf.data pipeline (`data.pipeline`) and code
that batches with NumPy under another backend cut a corpus into the same
buckets and batch shapes.
"""

from keras_transformer._validation import check_positive_int

# What the pipeline does with a pair longer than its maximum length.
LENGTH_POLICIES = ("filter", "truncate")


def bucket_edges(max_length, smallest=8):
    """The longest sequence of each length bucket, the last one `max_length`.

    Edges grow by about 1.3x, rounded up to a multiple of 4: padding stays
    under about a third of a batch, while the number of distinct batch shapes
    (one compiled program each under XLA) grows only with the log of
    `max_length`.

    Args:
        max_length: the longest sequence a batch may hold.
        smallest: the first bucket's edge.

    Returns:
        A strictly increasing list of ints ending with `max_length`.

    Example:

    >>> bucket_edges(33)
    [8, 12, 16, 24, 32, 33]
    """
    check_positive_int("max_length", max_length)
    edges, edge = [], smallest
    while edge < max_length:
        edges.append(edge)
        edge = -(-edge * 13 // 40) * 4  # ceil(edge * 1.3 / 4) * 4, in integers
    return edges + [max_length]


def bucket_batch_sizes(edges, batch_tokens):
    """Rows of a batch in each bucket: `batch_tokens` over the bucket's edge.

    Example:

    >>> bucket_batch_sizes([8, 12, 16], 64)
    [8, 5, 4]
    """
    return [max(1, batch_tokens // edge) for edge in edges]
