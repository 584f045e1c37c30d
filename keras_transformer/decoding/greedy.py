"""Greedy decoding over any step function, in one graph."""

from typing import Any, NamedTuple

import tensorflow as tf

from keras_transformer.decoding import _common
from keras_transformer.decoding._common import Rules  # noqa: F401 (the searches' argument)


class GreedyState(NamedTuple):
    """The loop state of `greedy_search` and `sample_search`."""

    i: Any  # [] int32: the position being generated
    ids: Any  # [batch] int32: the last token of each row
    sequences: Any  # [batch, max_length] int32: tokens so far, 0 after the end
    log_probs: Any  # [batch] float32: sum of the chosen tokens' log-probabilities
    finished: Any  # [batch] bool: the row has produced its end token
    lengths: Any  # [batch] int32: tokens generated, the end token included
    state: Any  # the step function's state, leading dimension batch


# The loop is an explicit tf.while_loop: AutoGraph has nothing to convert,
# and converting the caller's step function has picked the wrong method.
@tf.autograph.experimental.do_not_convert
def greedy_search(
    step_fn,
    initial_ids,
    initial_state,
    *,
    max_length,
    rules,
    prefix=None,
    grow_state=None,
    grow_lengths=None,
):
    """Picks the most likely token at every step until each row ends.

    Same contract as `beam_search` with one beam: `step_fn(ids [batch],
    index, state) -> (logits [batch, vocab], state)`.

    Args:
        step_fn: the model's incremental decoding step.
        initial_ids: `[batch]` start token of each row.
        initial_state: nested tensors with leading dimension `batch`.
        max_length: most tokens generated per row.
        rules: a `Rules`, as in `beam_search`.
        prefix: a `Prefix` forced first, as in `beam_search`, or None.
        grow_state, grow_lengths: caches that grow with the output, as in
            `beam_search`.

    Returns:
        `(sequences [batch, 1, max_length] int32, scores [batch, 1] float32)`:
        generated tokens (start excluded, end included, then 0) and their
        length-normalized log-probability.

    Example:

    With the bigram table of `beam_search`'s example (a `Transformer`
    gives `model.decode_step` and `model.init_decoding_state(source_ids,
    max_length)` instead):

    >>> import tensorflow as tf
    >>> uniform = [0.2] * 5
    >>> table = tf.math.log([uniform, uniform, [0.01, 0.01, 0.01, 0.37, 0.6],
    ...                      uniform, [0.01, 0.01, 0.01, 0.9, 0.07]])
    >>> def step(ids, index, state):
    ...     return tf.gather(table, ids), state
    >>> sequences, scores = greedy_search(step, tf.constant([2]), {}, max_length=3,
    ...                                   rules=Rules(end_id=3, alpha=0.0))
    >>> sequences.numpy().tolist()
    [[[4, 3, 0]]]
    """

    def most_likely(step_log_probs, index):
        return tf.argmax(step_log_probs, axis=-1, output_type=tf.int32)

    return token_by_token(
        step_fn, initial_ids, initial_state, most_likely, max_length=max_length, rules=rules,
        prefix=prefix, grow_state=grow_state, grow_lengths=grow_lengths,
    )  # fmt: skip


@tf.autograph.experimental.do_not_convert
def token_by_token(
    step_fn,
    initial_ids,
    initial_state,
    choose,
    *,
    max_length,
    rules,
    prefix=None,
    grow_state=None,
    grow_lengths=None,
):
    """The loop of greedy search and sampling: one token a step, chosen by
    `choose(step_log_probs [batch, vocab], index) -> tokens [batch] int32`,
    until every row has ended. The scores are the model's log-probabilities
    of the chosen tokens (whatever `choose` did to pick them), summed and
    length-normalized; the arguments and returns are `greedy_search`'s.
    """
    _, max_length, rules = _common.check_arguments(1, max_length, rules)
    if prefix is not None:
        prefix = _common.Prefix(*prefix)
    initial_ids = tf.cast(initial_ids, tf.int32)
    batch = tf.shape(initial_ids)[0]
    initial = GreedyState(
        i=tf.constant(0),
        ids=initial_ids,
        sequences=tf.zeros([batch, max_length], tf.int32),
        log_probs=tf.zeros([batch], tf.float32),
        finished=tf.zeros([batch], tf.bool),
        lengths=tf.zeros([batch], tf.int32),
        state=initial_state,
    )

    def not_done(s):
        return tf.logical_and(s.i < max_length, tf.logical_not(tf.reduce_all(s.finished)))

    def body(s):
        logits, state = step_fn(s.ids, s.i, s.state)
        step_log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)  # [batch, vocab]
        step_log_probs = _common.restrict(
            step_log_probs, s.i, max_length, rules, s.sequences, prefix
        )
        tokens = choose(step_log_probs, s.i)  # [batch]
        token_log_probs = tf.gather(step_log_probs, tokens, batch_dims=1)  # [batch]
        tokens = tf.where(s.finished, 0, tokens)
        return (
            GreedyState(
                i=s.i + 1,
                ids=tokens,
                sequences=_common.write_position(s.sequences, s.i, tokens),
                log_probs=s.log_probs + tf.where(s.finished, 0.0, token_log_probs),
                finished=tf.logical_or(s.finished, tf.equal(tokens, rules.end_id)),
                lengths=s.lengths + tf.cast(tf.logical_not(s.finished), tf.int32),
                state=state,
            ),
        )

    final = _common.loop_in_segments(
        not_done, body, initial, max_length, grow_state, lengths=grow_lengths
    )
    # A prefix's tokens are given: the penalty counts the tokens after them.
    given = 0 if prefix is None else tf.cast(prefix.lengths, tf.int32)
    penalty = _common.length_penalty(final.lengths - given, rules.alpha, rules.length_penalty)
    scores = final.log_probs / penalty
    return final.sequences[:, None, :], scores[:, None]
