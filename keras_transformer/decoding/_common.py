"""What greedy and beam search share."""

import numbers

import tensorflow as tf

from keras_transformer._validation import check_positive_int

# Stands for log(0) without producing NaN in sums.
NEG_INF = -1.0e9


def length_penalty(length, alpha):
    """GNMT length penalty `((5 + length) / 6) ** alpha` (Wu et al., 2016)."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def check_arguments(beam_size, max_length, end_id, alpha):
    """Validates the search arguments; returns them with the ints as Python ints.

    NumPy integers are accepted (sizes and ids often come from arrays):
    the loop's static shapes need plain ints.
    """
    beam_size, max_length, end_id = (as_int(v) for v in (beam_size, max_length, end_id))
    for name, value in (("beam_size", beam_size), ("max_length", max_length)):
        check_positive_int(name, value)
    if not isinstance(end_id, int) or end_id < 0:
        raise ValueError(f"`end_id` must be a non-negative int. Received: end_id={end_id!r}")
    if not alpha >= 0:
        raise ValueError(f"`alpha` must be >= 0. Received: alpha={alpha!r}")
    return beam_size, max_length, end_id, alpha


def as_int(value):
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


def write_position(sequences, index, tokens):
    """Writes `tokens [...]` at position `index` of `sequences [..., length]`."""
    length = tf.shape(sequences)[-1]
    at_index = tf.one_hot(index, length, dtype=sequences.dtype)  # [length]
    return sequences * (1 - at_index) + tokens[..., None] * at_index


def zero_after_end(sequences, end_id):
    """Pads with 0 everything after the first `end_id` of each sequence."""
    is_end = tf.cast(tf.equal(sequences, end_id), tf.int32)
    ended_before = tf.math.cumsum(is_end, axis=-1, exclusive=True) > 0
    return tf.where(ended_before, tf.zeros_like(sequences), sequences)
