"""Beam search over any step function, in one `tf.while_loop` graph."""

from typing import Any, NamedTuple

import tensorflow as tf

from keras_transformer.decoding import _common
from keras_transformer.decoding._common import Rules  # noqa: F401 (the searches' argument)

NEG_INF = _common.NEG_INF


def _gather_beams(tensor, indices, batch, beams_in):
    """Picks `indices [batch, k]` of the beams of `tensor [batch * beams_in, ...]`."""
    offsets = tf.range(batch)[:, None] * beams_in  # [batch, 1]
    # gather_nd copies whole rows; on CPU it is 3x faster than GatherV2 for
    # the decoder caches' large rows (measured: 32 vs 110 us for 256 KB).
    return tf.gather_nd(tensor, tf.reshape(indices + offsets, [-1, 1]))  # [batch * k, ...]


class BeamState(NamedTuple):
    """The loop state of `beam_search`, one row per input sentence."""

    i: Any  # [] int32: the position being generated
    ids: Any  # [batch * beams] int32: the last token of each alive hypothesis
    alive_seqs: Any  # [batch, beams, max_length] int32
    alive_log_probs: Any  # [batch, beams] float32: raw log-probabilities
    finished_seqs: Any  # [batch, beams, max_length] int32
    finished_scores: Any  # [batch, beams] float32: length-normalized
    finished_flags: Any  # [batch, beams] bool: whether the slot holds a hypothesis
    done: Any  # [batch] bool: the row's finished set can no longer improve
    state: Any  # the step function's state, leading dimension batch * beams

    @classmethod
    def shape_invariants(cls, beams, max_length, state):
        """The shapes the loop keeps: all but the batch axis are fixed, so a
        step must return its state in the shapes it received (as
        `greedy_search`)."""
        return cls(
            i=tf.TensorShape([]),
            ids=tf.TensorShape([None]),
            alive_seqs=tf.TensorShape([None, beams, max_length]),
            alive_log_probs=tf.TensorShape([None, beams]),
            finished_seqs=tf.TensorShape([None, beams, max_length]),
            finished_scores=tf.TensorShape([None, beams]),
            finished_flags=tf.TensorShape([None, beams]),
            done=tf.TensorShape([None]),
            # Static inner axes (cache length, heads, width) let every op of
            # the step see its shapes: no shape reads, folded constants.
            state=tf.nest.map_structure(
                lambda t: tf.TensorShape([None]).concatenate(t.shape[1:]), state
            ),
        )


def _tile_beams(tensor, beam_size):
    """`[batch, ...]` -> `[batch * beam_size, ...]`, each row repeated."""
    return tf.repeat(tensor, beam_size, axis=0)


# The loop is an explicit tf.while_loop: AutoGraph has nothing to convert,
# and converting the caller's step function has picked the wrong method.
@tf.autograph.experimental.do_not_convert
def beam_search(
    step_fn,
    initial_ids,
    initial_state,
    *,
    beam_size,
    max_length,
    rules,
    prefix=None,
    grow_state=None,
    grow_lengths=None,
):
    """Finds the most likely sequences under a length-normalized score.

    The search of GNMT/tensor2tensor: at each step the `beam_size` alive
    hypotheses are extended with every token (`log_softmax` scores), the
    best `2 * beam_size` candidates are split into those that ended (moved
    to the finished set, scored `log_prob / ((5 + length) / 6) ** alpha`)
    and those still alive (the best `beam_size` are kept; the decoder state
    is reordered to follow them); as in fairseq, an ending counts only
    among the best `beam_size` candidates, so one beam is greedy search.
    Finished hypotheses are never extended. A
    row stops once no alive hypothesis can beat its worst finished one;
    the loop stops when every row has. Rows whose hypotheses never end get
    their alive hypotheses, scored at `max_length`.

    Args:
        step_fn: `step_fn(ids [batch * beam_size], index, state) ->
            (logits [batch * beam_size, vocab], state)`; `index` is the
            0-based position being generated.
        initial_ids: `[batch]` start token of each row.
        initial_state: nested tensors with leading dimension `batch`
            (e.g. decoder caches, encoder output and mask). The first step
            runs on it as it is, one beam a row (every beam starts from the
            start token); its state is then tiled to `batch * beam_size`.
            `step_fn` returns it in the same shapes (a cache of fixed
            size). Tensors that `step_fn` returns as it received them are
            not reordered with the beams: each step saves copying them.
        beam_size: hypotheses kept per row.
        max_length: most tokens generated per hypothesis.
        rules: a `Rules`: the end token, the length penalty, and what may
            not be generated (banned ids and sequences, a forced end).
        prefix: a `Prefix` of each row's first tokens, forced before the
            search goes on freely (CTranslate2's `target_prefix`), or None.
            As `generate()` with a decoder prompt, the forced tokens are
            given, not chosen: they add nothing to the score, and the
            length penalty counts the tokens after them; `max_length`
            counts them.
        grow_state: optional `grow_state(state, length) -> state`, for a
            state of caches indexed by position (whose length the step
            reads from their shapes): the search then runs its first 16
            steps with caches of 16 positions, steps 16-31 with 32, 32-63
            with 64 and so on up to `max_length`, growing them in between,
            so that a short output reads and reorders short caches (each
            length is a loop of its own: more to compile).
            `_common.grow_caches` grows the model's decoding state.
        grow_lengths: the cache lengths of the segments instead of
            doubling from 16 (ascending; `max_length` is always the last):
            fewer lengths, fewer loops.

    Returns:
        `(sequences [batch, beam_size, max_length] int32, scores [batch,
        beam_size] float32)`, best first. Sequences exclude the start token,
        include the end token, and are 0 after it; a hypothesis' length for
        the penalty counts its tokens including the end token.

    Example:

    A bigram table as the step function (with a `Transformer`, pass
    `model.decode_step` and `model.init_decoding_state(source_ids,
    max_length)`): after the start token 2, token 4 (p=0.6) or the end
    token 3 (p=0.37); after 4, the end token (p=0.9).

    >>> import tensorflow as tf
    >>> uniform = [0.2] * 5
    >>> table = tf.math.log([uniform, uniform, [0.01, 0.01, 0.01, 0.37, 0.6],
    ...                      uniform, [0.01, 0.01, 0.01, 0.9, 0.07]])
    >>> def step(ids, index, state):
    ...     return tf.gather(table, ids), state
    >>> rules = Rules(end_id=3, alpha=0.0)
    >>> sequences, scores = beam_search(step, tf.constant([2]), {}, beam_size=2,
    ...                                 max_length=3, rules=rules)
    >>> sequences.numpy().tolist()
    [[[4, 3, 0], [3, 0, 0]]]
    >>> [round(float(s), 3) for s in scores[0]]  # log(0.6 * 0.9), log(0.37)
    [-0.616, -0.994]
    """
    beam_size, max_length, rules = _common.check_arguments(beam_size, max_length, rules)
    end_id, alpha, length_penalty = rules.end_id, rules.alpha, rules.length_penalty
    k = beam_size
    # The tokens of each row's prefix are given, not chosen: as generate()
    # with a decoder prompt, they score nothing and the length penalty
    # counts the tokens after them.
    given = 0
    if prefix is not None:
        prefix = _common.Prefix(*prefix)
        given = tf.cast(prefix.lengths, tf.int32)  # [batch]
        prefix = prefix.tiled(k)  # [batch * k, length]
    initial_ids = tf.cast(initial_ids, tf.int32)
    batch = tf.shape(initial_ids)[0]
    max_penalty = _common.length_penalty(max_length - given, alpha, length_penalty)  # [] or [batch]

    if grow_state is not None:
        # The first step runs before the loop's first segment: at its length.
        initial_state = grow_state(
            initial_state, _common.grown_lengths(max_length, grow_lengths)[0]
        )
    # Only the first beam is live at the start, so the first step does not
    # pick the same token k times. The step's state joins after that step.
    initial = BeamState(
        i=tf.constant(0),
        ids=_tile_beams(initial_ids, k),
        alive_seqs=tf.zeros([batch, k, max_length], tf.int32),
        alive_log_probs=tf.tile(tf.constant([[0.0] + [NEG_INF] * (k - 1)]), [batch, 1]),
        finished_seqs=tf.zeros([batch, k, max_length], tf.int32),
        finished_scores=tf.fill([batch, k], NEG_INF),
        finished_flags=tf.zeros([batch, k], tf.bool),
        done=tf.zeros([batch], tf.bool),
        state=(),
    )

    def rows_done(alive_log_probs, finished_scores, finished_flags, generated):
        # With alpha >= 0, GNMT's penalty grows with the length: the bound
        # at `max_length` is exact. With alpha < 0 every penalty shrinks as
        # the log-probability falls, so the current length's is exact. The
        # power form follows generate()'s heuristic, which scores the best
        # alive hypothesis at the current length whatever alpha's sign.
        if length_penalty == "power" or alpha < 0:
            penalty = _common.length_penalty(generated - given, alpha, length_penalty)
        else:
            penalty = max_penalty
        best_possible = alive_log_probs[:, 0] / penalty  # [batch]
        worst_finished = tf.reduce_min(
            tf.where(finished_flags, finished_scores, NEG_INF), axis=1
        )  # [batch]
        all_finished = tf.reduce_all(finished_flags, axis=1)  # [batch]
        return tf.logical_and(all_finished, worst_finished >= best_possible)

    def not_done(s):
        return tf.logical_and(s.i < max_length, tf.logical_not(tf.reduce_all(s.done)))

    def choose(s, logits):
        """The hypotheses that `logits [batch * k, vocab]` extend `s` to, and
        the beam each alive one comes from, `[batch, k]`; the step
        function's state is left to the caller."""
        vocab = tf.shape(logits)[-1]
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        history = tf.reshape(s.alive_seqs, [-1, max_length])  # [batch * k, max_length]
        log_probs = _common.restrict(log_probs, s.i, max_length, rules, history, prefix)
        log_probs = tf.reshape(log_probs, [batch, k, vocab])
        candidates = s.alive_log_probs[:, :, None] + log_probs  # [batch, k, vocab]
        # The best over each row's k * vocab candidates, index beam * vocab + token.
        top_log_probs, top_indices = _common.top_k(candidates, k=2 * k)  # [batch, 2k]
        top_beams = top_indices // vocab  # [batch, 2k]
        top_tokens = top_indices % vocab  # [batch, 2k]
        top_seqs = tf.gather(s.alive_seqs, top_beams, batch_dims=1)  # [batch, 2k, max_length]
        top_seqs = _common.write_position(top_seqs, s.i, top_tokens)
        # A candidate of a banned token (log-probability about NEG_INF: only
        # a forced prefix leaves so few choices) is not an ending.
        ended = tf.logical_and(tf.equal(top_tokens, end_id), top_log_probs > NEG_INF / 2)

        # Alive: the best k candidates that did not end.
        alive_candidates = tf.where(ended, NEG_INF, top_log_probs)
        alive_log_probs, alive_pick = tf.math.top_k(alive_candidates, k=k)  # [batch, k]
        source_beams = tf.gather(top_beams, alive_pick, batch_dims=1)  # [batch, k]

        # Finished: merge the candidates that ended into the best k so far.
        # Only ends among the best k candidates count (as in fairseq), so
        # that one beam decodes exactly like greedy search.
        in_top_k = tf.range(2 * k) < k  # [2k]
        # A stopped row takes no more finished hypotheses.
        ended = tf.logical_and(ended, in_top_k[None, :])
        ended = tf.logical_and(ended, tf.logical_not(s.done)[:, None])
        chosen_length = s.i + 1 - given  # [] or [batch]
        penalty = _common.length_penalty(chosen_length, alpha, length_penalty)
        new_scores = top_log_probs / tf.reshape(penalty, [-1, 1])
        new_scores = tf.where(ended, new_scores, NEG_INF)
        pool_seqs = tf.concat([s.finished_seqs, top_seqs], axis=1)  # [batch, 3k, max_length]
        pool_scores = tf.concat([s.finished_scores, new_scores], axis=1)  # [batch, 3k]
        pool_flags = tf.concat([s.finished_flags, ended], axis=1)  # [batch, 3k]
        finished_scores, pick = tf.math.top_k(pool_scores, k=k)  # [batch, k]
        finished_flags = tf.gather(pool_flags, pick, batch_dims=1)
        done = tf.logical_or(
            s.done, rows_done(alive_log_probs, finished_scores, finished_flags, s.i + 1)
        )
        chosen = BeamState(
            i=s.i + 1,
            ids=tf.reshape(tf.gather(top_tokens, alive_pick, batch_dims=1), [-1]),
            alive_seqs=tf.gather(top_seqs, alive_pick, batch_dims=1),
            alive_log_probs=alive_log_probs,
            finished_seqs=tf.gather(pool_seqs, pick, batch_dims=1),
            finished_scores=finished_scores,
            finished_flags=finished_flags,
            done=done,
            state=s.state,
        )
        return chosen, source_beams

    def body(s):
        logits, state = step_fn(s.ids, s.i, s.state)  # [batch * k, vocab]
        chosen, source_beams = choose(s, logits)
        # The decoder state follows the hypotheses it now belongs to, except
        # what the step passed through unchanged (the encoder output, the
        # cross-attention cache): tiled from one row, it is the same for
        # every beam of the row.
        state = tf.nest.map_structure(
            lambda new, old: new if new is old else _gather_beams(new, source_beams, batch, k),
            state,
            s.state,
        )
        return (chosen._replace(state=state),)

    # The first step runs on one beam a row (the others hold nothing yet),
    # as CTranslate2 runs it; its state is then tiled over the beams, which
    # all come from that one.
    logits, state = step_fn(initial_ids, initial.i, initial_state)  # [batch, vocab]
    first, _ = choose(initial, _tile_beams(logits, k))
    first = first._replace(state=tf.nest.map_structure(lambda t: _tile_beams(t, k), state))
    final = _common.loop_in_segments(
        not_done,
        body,
        first,
        max_length,
        grow_state,
        invariants=lambda state: BeamState.shape_invariants(k, max_length, state),
        lengths=grow_lengths,
    )
    # Rows short of k finished hypotheses are completed with alive ones,
    # which always rank after the finished.
    alive_scores = final.alive_log_probs / tf.reshape(max_penalty, [-1, 1])
    pool_seqs = tf.concat(
        [final.finished_seqs, final.alive_seqs], axis=1
    )  # [batch, 2k, max_length]
    pool_scores = tf.concat([final.finished_scores, alive_scores], axis=1)  # [batch, 2k]
    pool_flags = tf.concat([final.finished_flags, tf.zeros_like(final.finished_flags)], axis=1)
    rank = pool_scores + tf.where(pool_flags, 0.0, 2 * NEG_INF)
    _, pick = tf.math.top_k(rank, k=k)
    sequences = tf.gather(pool_seqs, pick, batch_dims=1)
    scores = tf.gather(pool_scores, pick, batch_dims=1)
    return _common.zero_after_end(sequences, end_id), scores
