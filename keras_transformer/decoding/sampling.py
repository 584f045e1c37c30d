"""Sampling: each token drawn from the model's distribution, reshaped by a
temperature and cut to the top-k tokens and the top-p (nucleus) mass."""

import tensorflow as tf

from keras_transformer._validation import check_sampling
from keras_transformer.decoding import _common
from keras_transformer.decoding._common import Rules  # noqa: F401 (the searches' argument)
from keras_transformer.decoding.greedy import token_by_token


def filter_logits(logits, temperature=1.0, top_k=0, top_p=1.0):
    """Divides by `temperature`, then keeps the `top_k` most likely tokens
    and the fewest most likely tokens whose probability reaches `top_p`
    (always at least one); the others get -inf.

    Args:
        logits: `[batch, vocab]` float32.
        temperature: > 1 flattens the distribution, < 1 sharpens it.
        top_k: tokens kept (0: all).
        top_p: probability mass kept (1: all).

    Returns:
        `[batch, vocab]` logits to sample from.

    Example:

    >>> logits = tf.math.log([[0.5, 0.3, 0.15, 0.05]])
    >>> kept = filter_logits(logits, top_p=0.75)
    >>> (kept.numpy() > -1e30).tolist()  # 0.5 + 0.3 reaches 0.75
    [[True, True, False, False]]
    """
    logits = tf.cast(logits, tf.float32) / temperature
    vocab = tf.shape(logits)[-1]
    if top_k:
        kth = tf.math.top_k(logits, k=tf.minimum(top_k, vocab)).values[:, -1:]
        logits = tf.where(logits < kth, -float("inf"), logits)
    if top_p < 1.0:
        ordered = tf.sort(logits, axis=-1, direction="DESCENDING")
        probs = tf.nn.softmax(ordered, axis=-1)
        # A token is kept while the mass before it is below top_p.
        mass_before = tf.math.cumsum(probs, axis=-1, exclusive=True)
        kept = tf.reduce_sum(tf.cast(mass_before < top_p, tf.int32), axis=-1, keepdims=True)
        threshold = tf.gather(ordered, kept - 1, batch_dims=1)
        logits = tf.where(logits < threshold, -float("inf"), logits)
    return logits


@tf.autograph.experimental.do_not_convert
def sample_search(
    step_fn,
    initial_ids,
    initial_state,
    *,
    max_length,
    rules,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=None,
    prefix=None,
    grow_state=None,
    grow_lengths=None,
):
    """Draws each token from the model's filtered distribution until every
    row ends, as fairseq's and OpenNMT-tf's sampling decoders do.

    `top_k=1` picks the most likely token: exactly `greedy_search`. The
    score of a sample is its log-probability under the model itself
    (before temperature and filtering), summed and length-normalized as
    `greedy_search` scores, so samples and searches compare.

    Args:
        step_fn: `step_fn(ids [batch], index, state) -> (logits [batch,
            vocab], state)`.
        initial_ids: `[batch]` start token of each row.
        initial_state: nested tensors with leading dimension `batch`.
        max_length: most tokens generated per row.
        rules: a `Rules`, as in `beam_search`: what no draw may take.
        temperature, top_k, top_p: see `filter_logits`.
        seed: an int, or a scalar integer tensor, for draws that repeat
            (stateless); None draws anew on every call.
        prefix: a `Prefix` forced first, as in `beam_search`, or None.
        grow_state, grow_lengths: caches that grow with the output, as in
            `beam_search`.

    Returns:
        `(sequences [batch, 1, max_length] int32, scores [batch, 1]
        float32)`, as `greedy_search`.

    Example:

    With the bigram table of `beam_search`'s example, `top_k=1` is greedy:

    >>> uniform = [0.2] * 5
    >>> table = tf.math.log([uniform, uniform, [0.01, 0.01, 0.01, 0.37, 0.6],
    ...                      uniform, [0.01, 0.01, 0.01, 0.9, 0.07]])
    >>> def step(ids, index, state):
    ...     return tf.gather(table, ids), state
    >>> sequences, _ = sample_search(step, tf.constant([2]), {}, max_length=3,
    ...                              rules=Rules(end_id=3), top_k=1)
    >>> sequences.numpy().tolist()
    [[[4, 3, 0]]]
    """
    temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
    if seed is not None:
        seed = _common.as_int(seed)
        is_tensor = tf.is_tensor(seed) and seed.dtype.is_integer and seed.shape.rank == 0
        if not (isinstance(seed, int) or is_tensor):
            raise ValueError(
                f"`seed` must be an int, a scalar integer tensor or None. Received: seed={seed!r}"
            )

    def choose(step_log_probs, index):
        if top_k == 1:  # the argmax itself: ties broken as greedy_search does
            return tf.argmax(step_log_probs, axis=-1, output_type=tf.int32)
        logits = filter_logits(step_log_probs, temperature, top_k, top_p)
        if seed is None:
            drawn = tf.random.categorical(logits, 1, dtype=tf.int32)
        else:
            drawn = tf.random.stateless_categorical(
                logits, 1, seed=tf.stack([tf.cast(seed, tf.int32), index]), dtype=tf.int32
            )
        return drawn[:, 0]

    return token_by_token(
        step_fn,
        initial_ids,
        initial_state,
        choose,
        max_length=max_length,
        rules=rules,
        prefix=prefix,
        grow_state=grow_state,
        grow_lengths=grow_lengths,
    )
