"""The attention masks against their definition written out element by
element: a query may attend to a key only where every given mask allows
it. Runs on every backend."""

import itertools

import keras
import numpy as np
import pytest

from keras_transformer.layers.masking import causal_attention_mask, merge_attention_masks
from tests.backends import assert_array_equal

NAMES = ("query_mask", "value_mask", "key_mask", "attention_mask", "causal_mask")


def _brute_force(masks, batch, queries, keys):
    """`[batch, queries, keys]`: True where every given mask allows it."""
    allowed = np.ones((batch, queries, keys), bool)
    for b, i, j in itertools.product(range(batch), range(queries), range(keys)):
        for name, mask in masks.items():
            if name == "query_mask":
                ok = mask[b, i]
            elif name in ("value_mask", "key_mask"):
                ok = mask[b, j]
            elif name == "causal_mask":
                ok = mask[0, i, j]
            else:
                ok = mask[b, i, j]
            allowed[b, i, j] &= bool(ok)
    return allowed


@pytest.mark.parametrize(
    "query_length,key_length,offset", [(1, 1, 0), (4, 4, 0), (3, 7, 4), (5, 2, 0), (2, 6, 1)]
)
def test_causal_mask_lets_a_query_see_keys_up_to_its_position(query_length, key_length, offset):
    got = keras.ops.convert_to_numpy(causal_attention_mask(query_length, key_length, offset))
    want = np.array([[[j <= i + offset for j in range(key_length)] for i in range(query_length)]])
    assert got.dtype == bool and got.shape == (1, query_length, key_length)
    assert_array_equal(got, want)


def test_causal_mask_takes_tensor_lengths_and_offset():
    got = causal_attention_mask(
        keras.ops.convert_to_tensor(2),
        keras.ops.convert_to_tensor(5),
        keras.ops.convert_to_tensor(3),
    )
    assert_array_equal(keras.ops.convert_to_numpy(got), [[[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]])


@pytest.mark.parametrize(
    "given", [c for n in range(1, len(NAMES) + 1) for c in itertools.combinations(NAMES, n)]
)
def test_merged_masks_allow_only_what_every_mask_allows(given):
    rng = np.random.default_rng(len(given) * 7 + sum(map(len, given)))
    batch, queries, keys = 2, 3, 4
    shapes = {
        "query_mask": (batch, queries),
        "value_mask": (batch, keys),
        "key_mask": (batch, keys),
        "attention_mask": (batch, queries, keys),
    }
    masks = {
        name: rng.random(shapes[name]) < 0.7
        if name != "causal_mask"
        else keras.ops.convert_to_numpy(causal_attention_mask(queries, keys, 1))
        for name in given
    }
    # Padding masks may come as 0/1 integers, as Keras passes them.
    inputs = {
        n: m.astype("int32") if n in ("query_mask", "key_mask") else m for n, m in masks.items()
    }
    got = keras.ops.convert_to_numpy(merge_attention_masks(**inputs))
    want = _brute_force(masks, batch, queries, keys)
    assert got.dtype == bool
    assert_array_equal(np.broadcast_to(got, want.shape), want)


def test_no_mask_merges_to_none():
    assert merge_attention_masks() is None
