"""What the searches share: the block top-k against `tf.math.top_k`."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import _common


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize(
    "rows, size, k, levels",
    [
        (3, 32000, 8, None),  # continuous values: no ties
        (2, 32000, 8, 5),  # five distinct values: ties everywhere
        (4, 3001, 6, 40),  # a last block of one value, ties
        (1, 1000, 2, None),  # small: tf.math.top_k itself
    ],
)
def test_block_top_k_is_top_k_ties_included(rows, size, k, levels, jit_compile):
    rng = np.random.default_rng(size + k)
    values = rng.normal(size=(rows, size)).astype("float32")
    if levels:
        values = np.round(values * levels / 4) / levels  # many exact ties
    values[0, -1] = values.max() + 1  # the best in the padded last block
    want_values, want_indices = tf.math.top_k(values, k=k)
    top_k = tf.function(lambda v: _common.top_k(v, k), jit_compile=jit_compile)
    got_values, got_indices = top_k(tf.constant(values))
    np.testing.assert_array_equal(got_indices, want_indices)
    np.testing.assert_array_equal(got_values, want_values)
