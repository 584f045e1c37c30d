"""The tf.data input pipeline: tokenize, frame, filter, bucket, batch."""

import dataclasses

import tensorflow as tf

from keras_transformer import buckets
from keras_transformer.buckets import LENGTH_POLICIES
from keras_transformer.data.tokenizer import END_ID, START_ID


@dataclasses.dataclass
class LengthStats:
    """How many pairs were over `max_length`, and what happened to them."""

    pairs: int = 0
    too_long: int = 0
    policy: str = "filter"

    def describe(self):
        verb = "dropped" if self.policy == "filter" else "truncated"
        return f"{self.too_long} of {self.pairs} pairs {verb} (longer than max_length)"


def _frame(source_tokenizer, target_tokenizer, max_length, policy):
    """Maps a batch of string pairs to framed id sequences."""

    def frame(src, tgt):
        src = source_tokenizer.tokenize(src)
        tgt = target_tokenizer.tokenize(tgt)
        # Source: ids + end; target: start + ids + end (split into in/out later).
        src_len = src.row_lengths() + 1
        tgt_len = tgt.row_lengths() + 2
        too_long = tf.logical_or(src_len > max_length, tgt_len > max_length + 1)
        if policy == "truncate":
            src = src[:, : max_length - 1]
            tgt = tgt[:, : max_length - 1]
        batch = src.nrows()
        end = tf.fill([batch, 1], END_ID)
        start = tf.fill([batch, 1], START_ID)
        src = tf.concat([src, end], axis=1)
        tgt = tf.concat([start, tgt, end], axis=1)
        return src, tgt, too_long

    return frame


def tokenize_pairs(dataset, source_tokenizer, target_tokenizer, max_length=128, policy="filter"):
    """`(source, target)` strings -> framed 1-D id sequences.

    The source is `ids + [end]`; the target is `[start] + ids + [end]`, so
    that `target[:-1]` is the decoder input and `target[1:]` the label, both
    at most `max_length` long.

    Returns:
        A dataset of `(source_ids, target_ids, is_too_long)`; with policy
        `"truncate"` the ids are already cut, with `"filter"` the caller
        drops the pairs marked too long (`make_batches` does).
    """
    if policy not in LENGTH_POLICIES:
        raise ValueError(f"`policy` must be one of {LENGTH_POLICIES}. Received: policy={policy!r}")
    if not isinstance(max_length, int) or max_length < 2:
        raise ValueError(f"`max_length` must be an int >= 2. Received: max_length={max_length!r}")
    frame = _frame(source_tokenizer, target_tokenizer, max_length, policy)
    dataset = dataset.batch(1024).map(frame, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    return dataset


def length_stats(framed, policy="filter"):
    """Counts the pairs over `max_length` in a `tokenize_pairs` dataset."""

    # Counted a batch of flags at a time: a reduce step per pair took
    # longer than tokenizing the pairs.
    def count(totals, long):
        return totals + tf.stack(
            [tf.size(long, tf.int64), tf.math.count_nonzero(long, dtype=tf.int64)]
        )

    flags = framed.map(lambda s, t, long: long).batch(8192)
    counts = flags.reduce(tf.zeros([2], tf.int64), count)
    pairs, too_long = counts.numpy().tolist()
    return LengthStats(pairs=pairs, too_long=too_long, policy=policy)


def frame_examples(dataset, source_tokenizer, target_tokenizer, max_length=128, policy="filter"):
    """`(source, target)` strings -> `(context, target_in, target_out)` ids.

    `tokenize_pairs`, with the pairs over `max_length` dropped (policy
    `"filter"`) or cut (`"truncate"`), and the target split into decoder
    input and label before any padding, so that no row's decoder input
    keeps its end token.

    Returns:
        A dataset of unbatched 1-D int32 `(context, target_in, target_out)`.
    """
    framed = tokenize_pairs(dataset, source_tokenizer, target_tokenizer, max_length, policy)
    if policy == "filter":
        framed = framed.filter(lambda s, t, long: tf.logical_not(long))
    return framed.map(lambda s, t, long: (s, t[:-1], t[1:]))


def batch_by_tokens(examples, batch_tokens=4096, max_length=128, pad_to_edges=False):
    """Groups examples of similar length into batches of about `batch_tokens`.

    Args:
        examples: unbatched `(context, target_in, target_out)` 1-D ids, as
            `frame_examples` gives, none longer than `max_length`.
        batch_tokens: token budget of a batch (padded, on the longer side).
        max_length: longest sequence of `examples`.
        pad_to_edges: pad every batch to its bucket's edge rather than to
            its longest row, so that a compiled train step (XLA, JAX's
            `jit`) sees a few shapes: two a bucket (full batches and the
            epoch's last), not one for each length.

    Returns:
        A prefetched dataset of `((context [b, s], target_in [b, t]),
        target_out [b, t])` int32 batches, padded with 0.

    Example:

    >>> import tensorflow as tf
    >>> examples = tf.data.Dataset.from_tensor_slices(
    ...     ([[5, 2]] * 10, [[1, 7]] * 10, [[7, 2]] * 10))
    >>> (context, target_in), target_out = next(iter(batch_by_tokens(examples, 64, 8)))
    >>> context.shape.as_list()
    [8, 2]
    """
    if not isinstance(batch_tokens, int) or isinstance(batch_tokens, bool):
        raise ValueError(f"`batch_tokens` must be an int. Received: batch_tokens={batch_tokens!r}")
    if batch_tokens < max_length:
        raise ValueError(
            "`batch_tokens` must be at least `max_length` "
            f"({max_length}). Received: batch_tokens={batch_tokens!r}"
        )
    edges = buckets.bucket_edges(max_length + 1)
    if pad_to_edges:
        # No sequence is longer than `max_length`: the last bucket pads to it.
        edges = [edge for edge in edges[:-1] if edge < max_length] + [max_length]
    sizes = buckets.bucket_batch_sizes(edges, batch_tokens)
    # Exclusive upper bounds: a bucket holds lengths up to its edge.
    boundaries = [edge + 1 for edge in edges]
    if not pad_to_edges:
        # The last bucket needs no bound: its batches pad to their longest.
        boundaries = boundaries[:-1]
    else:
        # tf.data pads a bucket to its bound less one, the edge; the bucket
        # past the last bound stays empty.
        sizes = [*sizes, sizes[-1]]
    batches = examples.bucket_by_sequence_length(
        element_length_func=lambda s, t_in, t_out: tf.maximum(tf.shape(s)[0], tf.shape(t_in)[0]),
        bucket_boundaries=boundaries,
        bucket_batch_sizes=sizes,
        padded_shapes=([None], [None], [None]),
        padding_values=(0, 0, 0),
        pad_to_bucket_boundary=pad_to_edges,
    )
    batches = batches.map(lambda s, t_in, t_out: ((s, t_in), t_out))
    options = tf.data.Options()
    # Multi-worker training shards the elements, not files.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return batches.with_options(options).prefetch(tf.data.AUTOTUNE)


def make_batches(
    dataset,
    source_tokenizer,
    target_tokenizer,
    *,
    batch_tokens=4096,
    max_length=128,
    policy="filter",
    shuffle=True,
    shuffle_buffer=20_000,
    cache=True,
    seed=None,
    repeat=False,
    pad_to_edges=False,
):
    """Builds training batches `((context, target_in), target_out)`.

    Pairs are tokenized in the graph, framed with start/end tokens,
    filtered or truncated at `max_length` (`frame_examples`), cached,
    shuffled, grouped into buckets of similar length and batched so that
    each batch holds about `batch_tokens` tokens (`batch_by_tokens`), then
    prefetched.

    Args:
        dataset: `(source, target)` strings, see `sources.load_dataset`.
        source_tokenizer, target_tokenizer: `SubwordTokenizer`s.
        batch_tokens: token budget of a batch.
        max_length: longest framed sequence.
        policy: `"filter"` drops longer pairs, `"truncate"` cuts them.
        shuffle: shuffle pairs (training) or keep their order.
        shuffle_buffer: shuffle buffer, in pairs.
        cache: cache the tokenized pairs in memory after the first epoch.
        seed: shuffle seed.
        repeat: repeat forever (then pass `steps_per_epoch` to `fit`).
        pad_to_edges: pad batches to their bucket's edge (`batch_by_tokens`).

    Returns:
        A `tf.data.Dataset` of `((context [b, s], target_in [b, t]),
        target_out [b, t])` int32 batches, padded with 0.
    """
    if not isinstance(batch_tokens, int) or batch_tokens < max_length:
        raise ValueError(
            "`batch_tokens` must be an int of at least `max_length` "
            f"({max_length}). Received: batch_tokens={batch_tokens!r}"
        )
    examples = frame_examples(dataset, source_tokenizer, target_tokenizer, max_length, policy)
    if cache:
        examples = examples.cache()
    if shuffle:
        examples = examples.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        examples = examples.repeat()
    return batch_by_tokens(examples, batch_tokens, max_length, pad_to_edges)
