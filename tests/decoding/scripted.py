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


def brute_force(table, row, start_id, end_id, max_length, alpha):
    """All hypotheses of one row, ranked by the GNMT-normalized score."""
    vocab = table.shape[-1]
    log_probs = table[row] - np.log(np.exp(table[row]).sum(-1, keepdims=True))
    results = []
    for length in range(1, max_length + 1):
        for seq in itertools.product(range(vocab), repeat=length):
            ends = [i for i, t in enumerate(seq) if t == end_id]
            if ends and ends[0] != length - 1:
                continue  # nothing follows the end token
            if not ends and length != max_length:
                continue  # unfinished hypotheses only at max_length
            total, last = 0.0, start_id
            for i, t in enumerate(seq):
                total += log_probs[i, last, t]
                last = t
            score = total / ((5 + length) / 6) ** alpha
            results.append((score, bool(ends), list(seq) + [0] * (max_length - length)))
    # Finished hypotheses rank before unfinished ones.
    results.sort(key=lambda r: (not r[1], -r[0]))
    return results
