"""What the searches share: the block top-k against `tf.math.top_k`, and
loops over states that grow."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import Rules, _common, beam_search, greedy_search
from keras_transformer.decoding.sampling import sample_search
from tests.decoding.scripted import grow_history, history_step_fn

START, END = 1, 3


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


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize(
    "rows, parts, size, k, levels, infinite",
    [
        (2, 4, 3001, 8, None, 0),  # a beam search's candidates: short last blocks
        (3, 4, 8000, 8, 5, 0),  # whole blocks, ties everywhere
        (2, 3, 1000, 4, 40, 0),  # short last blocks (40 values), ties
        (2, 2, 1000, 6, None, 998),  # -inf but 2 values a part: ties at -inf
        (1, 1, 3001, 6, None, 0),  # one part: as [rows, size]
    ],
)
def test_block_top_k_over_parts_is_top_k_of_the_flattened_values(
    rows, parts, size, k, levels, infinite, jit_compile
):
    rng = np.random.default_rng(size + parts)
    values = rng.normal(size=(rows, parts, size)).astype("float32")
    if levels:
        values = np.round(values * levels / 4) / levels
    values[:, :, size - infinite :] = -np.inf
    values[0, -1, -1] = values.max() + 1  # the best at the very end (a short block if any)
    want_values, want_indices = tf.math.top_k(values.reshape(rows, -1), k=k)
    top_k = tf.function(lambda v: _common.top_k(v, k), jit_compile=jit_compile)
    got_values, got_indices = top_k(tf.constant(values))
    np.testing.assert_array_equal(got_indices, want_indices)
    np.testing.assert_array_equal(got_values, want_values)


@pytest.mark.parametrize(
    "max_length, lengths",
    [(1, [1]), (16, [16]), (17, [16, 17]), (40, [16, 32, 40]), (64, [16, 32, 64]),
     (128, [16, 32, 64, 128])],
)  # fmt: skip
def test_state_lengths_double_from_16_up_to_max_length(max_length, lengths):
    assert _common.state_lengths(max_length) == lengths


@pytest.mark.parametrize(
    "max_length, lengths",
    [(5, [5]), (8, [8]), (20, [8, 16, 20]), (32, [8, 16, 24, 32]),
     (100, [8, 16, 24, 32, 64, 100]), (511, [8, 16, 24, 32, 64, 128, 256, 511])],
)  # fmt: skip
def test_state_lengths_step_then_double(max_length, lengths):
    assert _common.state_lengths(max_length, first=8, steps_until=32) == lengths


@pytest.mark.parametrize("length", [3, 5, 9])
def test_grown_caches_keep_what_was_written(length):
    # The decoder's caches: keys and values [rows, heads, length, head_dim].
    shape, written = (2, 4, 5, 8), 5
    cache = tf.constant(np.random.default_rng(0).normal(size=shape), tf.float32)
    caches = ((cache, cache + 1), (cache * 2, cache))
    state = {"self_attention_cache": caches, "other": tf.ones([2])}
    grown = _common.grow_caches(state, length)
    ((keys, values), (more, _)) = grown["self_attention_cache"]
    kept = min(length, written)
    for got, want in ((keys, cache), (values, cache + 1), (more, cache * 2)):
        assert got.shape == (2, 4, length, 8)
        np.testing.assert_array_equal(got[:, :, :kept], want[:, :, :kept])
        np.testing.assert_array_equal(got[:, :, kept:], 0)
    assert grown["other"] is state["other"]


SEARCHES = {
    "beam": lambda *args, **kw: beam_search(*args, beam_size=3, **kw),
    "greedy": greedy_search,
    "sampling": lambda *args, **kw: sample_search(*args, seed=7, **kw),
}


@pytest.mark.parametrize(
    "max_length, lengths, grown",
    [(40, None, [16, 32, 40]), (40, [32], [32, 40]), (40, [8, 64, 8], [8, 40]), (12, [32], [12])],
)  # fmt: skip
def test_grown_lengths_end_at_max_length(max_length, lengths, grown):
    assert _common.grown_lengths(max_length, lengths) == grown


@pytest.mark.parametrize("lengths", [[0], [-3], [2.5]])
def test_bad_grow_lengths_are_refused(lengths):
    with pytest.raises(ValueError, match="grow_lengths"):
        _common.grown_lengths(40, lengths)


@pytest.mark.parametrize("search", SEARCHES.values(), ids=SEARCHES)
@pytest.mark.parametrize("max_length, lengths", [(12, None), (40, None), (40, [32])])
def test_a_growing_state_gives_the_searches_results(search, max_length, lengths):
    # The end token is rare: every hypothesis of 40 runs through more than
    # one segment (16, 32, 40), and the history term makes every written
    # position and its order count.
    rng = np.random.default_rng(max_length)
    batch, vocab = 3, 6
    table = rng.normal(size=(batch, max_length, vocab, vocab)).astype("float32")
    table[..., END] -= 3.0

    def run(grow):
        seen = []
        state = {"row": tf.range(batch), "history": tf.zeros([batch, max_length], tf.int32)}
        step = history_step_fn(table, seen)
        options = dict(max_length=max_length, rules=Rules(end_id=END, alpha=0.6), grow_state=grow)
        if grow:
            options["grow_lengths"] = lengths
        result = tf.function(lambda: search(step, tf.fill([batch], START), state, **options))()
        # In a graph, one trace of the step per loop: one loop per length;
        # beam search's first step, on one beam a row, is a trace of its own.
        traces = _common.grown_lengths(max_length, lengths) if grow else [max_length]
        assert seen == (traces[:1] + traces if search is SEARCHES["beam"] else traces)
        return result

    runs = {grow: run(grow) for grow in (None, grow_history)}
    (sequences, scores), (grown_sequences, grown_scores) = runs.values()
    assert int(tf.reduce_min(tf.reduce_sum(tf.sign(sequences), -1))) > 16 or max_length < 16
    np.testing.assert_array_equal(grown_sequences, sequences)
    np.testing.assert_allclose(grown_scores, scores, rtol=1e-6)
