"""Greedy decoding over any step function, in one graph."""

import tensorflow as tf

from keras_transformer.decoding import _common


# The loop is an explicit tf.while_loop: AutoGraph has nothing to convert,
# and converting the caller's step function has picked the wrong method.
@tf.autograph.experimental.do_not_convert
def greedy_search(
    step_fn, initial_ids, initial_state, *, max_length, end_id, alpha=0.6, beam_size=1
):
    """Picks the most likely token at every step until each row ends.

    Same contract as `beam_search` with one beam: `step_fn(ids [batch],
    index, state) -> (logits [batch, vocab], state)`.

    Args:
        step_fn: the model's incremental decoding step.
        initial_ids: `[batch]` start token of each row.
        initial_state: nested tensors with leading dimension `batch`.
        max_length: most tokens generated per row.
        end_id: the end token.
        alpha: length-penalty exponent used for the score.
        beam_size: must be 1 (accepted so both searches share a signature).

    Returns:
        `(sequences [batch, 1, max_length] int32, scores [batch, 1] float32)`:
        generated tokens (start excluded, end included, then 0) and their
        length-normalized log-probability.
    """
    if beam_size != 1:
        raise ValueError(f"Greedy search has one beam. Received: beam_size={beam_size!r}")
    _, max_length, end_id, alpha = _common.check_arguments(1, max_length, end_id, alpha)
    initial_ids = tf.cast(initial_ids, tf.int32)
    batch = tf.shape(initial_ids)[0]
    sequences = tf.zeros([batch, max_length], tf.int32)
    log_probs = tf.zeros([batch], tf.float32)
    finished = tf.zeros([batch], tf.bool)
    lengths = tf.zeros([batch], tf.int32)

    def cond(i, ids, sequences, log_probs, finished, lengths, state):
        return tf.logical_and(i < max_length, tf.logical_not(tf.reduce_all(finished)))

    def body(i, ids, sequences, log_probs, finished, lengths, state):
        logits, state = step_fn(ids, i, state)
        step_log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)  # [batch, vocab]
        tokens = tf.argmax(step_log_probs, axis=-1, output_type=tf.int32)  # [batch]
        token_log_probs = tf.gather(step_log_probs, tokens, batch_dims=1)
        tokens = tf.where(finished, 0, tokens)
        log_probs += tf.where(finished, 0.0, token_log_probs)
        lengths += tf.cast(tf.logical_not(finished), tf.int32)
        sequences = _common.write_position(sequences, i, tokens)
        finished = tf.logical_or(finished, tf.equal(tokens, end_id))
        return i + 1, tokens, sequences, log_probs, finished, lengths, state

    loop_vars = (
        tf.constant(0),
        initial_ids,
        sequences,
        log_probs,
        finished,
        lengths,
        initial_state,
    )
    _, _, sequences, log_probs, _, lengths, _ = tf.while_loop(
        cond, body, loop_vars, maximum_iterations=max_length
    )
    scores = log_probs / _common.length_penalty(lengths, alpha)
    return sequences[:, None, :], scores[:, None]
