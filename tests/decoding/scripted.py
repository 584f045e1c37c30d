"""Scripted step functions whose best sequences are known by enumeration."""

import itertools

import numpy as np
import tensorflow as tf


def markov_step_fn(table):
    """`table [batch, max_length, vocab, vocab]`: logits for (row, index, last id).

    The state carries each hypothesis' row, so the step function is correct
    under the search's tiling and reordering.
    """
    table = tf.constant(table, tf.float32)

    def step_fn(ids, index, state):
        rows = state["row"]
        logits = tf.gather_nd(table, tf.stack([rows, tf.fill(tf.shape(rows), index), ids], axis=1))
        return logits, state

    return step_fn


def brute_force(
    table, row, start_id, end_id, max_length, alpha, penalty="gnmt", banned=(), forced_end=False,
    renormalize=False, suppressed=(), prefix=(),
):  # fmt: skip
    """All hypotheses of one row, ranked by the length-normalized score.

    `penalty` is `"gnmt"` or `"power"`; `banned` (an id or ids) never
    appear; no hypothesis holds a sequence of `suppressed` past its
    prefix; with `renormalize`, each step's softmax is over the tokens it
    allows; with `forced_end`, every hypothesis ends by `max_length`, its
    last end token at no cost. Every hypothesis begins with `prefix`,
    each of whose tokens scores the model's own log-probability.
    """
    vocab = table.shape[-1]
    banned = {banned} if isinstance(banned, int) else set(banned or ())
    prefix = tuple(prefix)
    results = []
    for length in range(max(1, len(prefix)), max_length + 1):
        for seq in itertools.product(range(vocab), repeat=length):
            if seq[: len(prefix)] != prefix:
                continue
            ends = [i for i, t in enumerate(seq) if t == end_id]
            if ends and ends[0] != length - 1:
                continue  # nothing follows the end token
            if not ends and (length != max_length or forced_end):
                continue  # unfinished hypotheses only at max_length
            total = _log_prob(table[row], seq, start_id, end_id, max_length, banned, forced_end,
                              renormalize, suppressed, len(prefix))  # fmt: skip
            if total is None:
                continue
            chosen = length - len(prefix)
            if penalty == "power":
                score = total / max(chosen, 1) ** alpha
            else:
                score = total / ((5 + chosen) / 6) ** alpha
            results.append((score, bool(ends), list(seq) + [0] * (max_length - length)))
    # Finished hypotheses rank before unfinished ones.
    results.sort(key=lambda r: (not r[1], -r[0]))
    return results


def _log_prob(table, seq, start_id, end_id, max_length, banned, forced_end, renormalize,
              suppressed, forced):  # fmt: skip
    """The score of `seq` under the rules, or None where they refuse it;
    its first `forced` tokens are the prefix."""
    total, last = 0.0, start_id
    for i, t in enumerate(seq):
        logits = table[i, last]
        raw = logits - np.log(np.exp(logits).sum())
        last = t
        if i < forced:
            continue  # given, at no cost
        allowed = np.ones(len(logits), bool)
        allowed[list(banned)] = False
        for s in suppressed:
            if tuple(seq[i - len(s) + 1 : i]) == tuple(s[:-1]) and i >= len(s) - 1:
                allowed[s[-1]] = False
        if forced_end and i == max_length - 1:
            if t != end_id:
                return None
            continue  # at no cost
        if not allowed[t]:
            return None
        if renormalize:
            total += logits[t] - np.log(np.exp(logits[allowed]).sum())
        else:
            total += raw[t]
    return total


def history_step_fn(table, lengths_seen):
    """`markov_step_fn(table)` plus a term that reads the whole of a
    position-indexed cache, `state["history"] [rows, length]` (the ids
    generated so far, 0 after them), as a decoder reads its caches: a
    search that loses, misplaces or fails to reorder a written position
    changes the logits. The cache's length is read from its shape and
    recorded in `lengths_seen` at each trace.
    """
    markov = markov_step_fn(table)
    vocab = table.shape[-1]

    def step_fn(ids, index, state):
        logits, _ = markov(ids, index, state)
        history = state["history"]
        length = history.shape[1]
        lengths_seen.append(length)
        weights = tf.range(1, length + 1)[None, :]  # where each id was written matters
        pull = tf.one_hot(tf.reduce_sum(history * weights, axis=1) % vocab, vocab)
        history = tf.where(tf.range(length)[None, :] == index, ids[:, None], history)
        return logits + 0.3 * pull, {**state, "history": history}

    return step_fn


def grow_history(state, length):
    """`state["history"]` holding `length` positions: a search's `grow_state`."""
    history = state["history"]
    extra = length - history.shape[1]
    if extra <= 0:
        history = history[:, :length]
    else:
        history = tf.pad(history, [[0, 0], [0, extra]])
    return {**state, "history": history}
