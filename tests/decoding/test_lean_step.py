"""`LeanStep` against the model's own `decode_step`, and the compiled
translator against the plain one."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data.tokenizer import START_ID
from keras_transformer.decoding import Translator
from keras_transformer.decoding.lean_step import LeanStep
from keras_transformer.models import Transformer

VOCAB = 40
STEPS = 6

ARCHITECTURES = {
    "post-norm": {},
    "pre-norm, shared embeddings": dict(norm_first=True, share_embeddings=True),
    "learned positions, gelu": dict(position_encoding="learned", activation="gelu"),
}


def _model(overrides, seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    model = Transformer(2, 32, 4, 64, VOCAB, VOCAB, dropout=0.0, max_length=64, **overrides)
    model.build(((None, None), (None, None)))
    return model


@pytest.mark.parametrize("concatenated", ["per program", "given"])
@pytest.mark.parametrize("beams", [1, 3])
@pytest.mark.parametrize("overrides", ARCHITECTURES.values(), ids=ARCHITECTURES)
def test_every_step_gives_the_logits_of_decode_step(overrides, beams, concatenated):
    # With beams, the lean step reads each source row's encoder output once
    # for all its beams; the model's step reads it tiled, one copy a beam.
    # The lean encoder (fused projections, batched attention) must give the
    # model's encoder output on real tokens, a padded source included.
    model = _model(overrides)
    rng = np.random.default_rng(1)
    context = rng.integers(1, VOCAB, size=(3, 7)).astype("int32")
    context[1, 4:] = 0  # a padded source
    tokens = rng.integers(1, VOCAB, size=(3 * beams, STEPS)).astype("int32")
    tokens[2, 3] = 0  # a padding token as input attends to nothing, in both

    given = None
    if concatenated == "given":
        given = tf.nest.map_structure(tf.Variable, LeanStep.concatenate_weights(model))
    lean = LeanStep(model, given)

    @tf.function(jit_compile=True)
    def lean_logits(context, tokens):
        constant, state = lean.initial_state(context, STEPS)
        state = tf.nest.map_structure(lambda t: tf.repeat(t, beams, axis=0), state)
        step, outputs = lean.step_fn(constant, beams), []
        for i in range(STEPS):
            logits, state = step(tokens[:, i], i, state)
            outputs.append(logits)
        return tf.stack(outputs, axis=1)

    state = model.init_decoding_state(np.repeat(context, beams, axis=0), STEPS)
    want = []
    for i in range(STEPS):
        logits, state = model.decode_step(tokens[:, i], i, state)
        want.append(logits)
    np.testing.assert_allclose(lean_logits(context, tokens), tf.stack(want, axis=1), atol=1e-4)


# The step test covers every architecture; two suffice for the search.
# 20 tokens: the compiled searches grow their caches from 16 positions to
# 20 (two loops to compile); 10: one loop.
@pytest.mark.parametrize(
    "overrides, tokens",
    [({}, 20), (ARCHITECTURES["pre-norm, shared embeddings"], 10)],
    ids=["post-norm, 20 tokens", "pre-norm, shared embeddings, 10 tokens"],
)
def test_the_compiled_searches_equal_the_plain_ones(overrides, tokens):
    # Batch sizes (1, 2) and lengths (4, 10 or 20): 3 rows run as chunks of
    # 2 and 1, 5 as 2, 2 and 1, each chunk of 2 as two programs of one row
    # at once; sources of 3 and 8 tokens take both lengths; no rows run
    # nothing.
    model = _model(overrides, seed=2)
    options = dict(max_output_length=tokens, beam_size=3)
    plain = Translator(model, None, None, **options)
    compiled = Translator(model, None, None, jit_compile=True, batch_sizes=(2, 1),
                          lengths=(4,), max_input_length=8, **options)  # fmt: skip
    assert compiled.lengths == [4, tokens] and compiled.batch_sizes == [1, 2]
    assert compiled.program_batch_sizes == [1]
    rng = np.random.default_rng(0)
    for rows, source_length in ((1, 3), (3, 8), (5, 3), (0, 8)):
        context = tf.constant(rng.integers(4, VOCAB, size=(rows, source_length)), tf.int32)
        for beams in (3, 1):
            want, want_scores = plain._search(context, beams)
            got, got_scores = compiled._search(context, beams)
            assert got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            np.testing.assert_allclose(got_scores, want_scores, atol=1e-4)
        # XLA draws with its own generator: a seed repeats the compiled draws.
        first, _ = compiled._search(context, 1, sample=True, seed=5)
        again, _ = compiled._search(context, 1, sample=True, seed=5)
        np.testing.assert_array_equal(first, again)
        assert first.shape == (rows, 1, tokens)


def _first_logits(lean):
    """A compiled function: `context` -> the logits of `lean`'s first step
    from the start token, over caches of 4 positions."""

    @tf.function(jit_compile=True)
    def first(context):
        constant, state = lean.initial_state(context, 4)
        return lean.step_fn(constant)(tf.fill([1], START_ID), 0, state)[0]

    return first


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_step_runs_under_mixed_precision(norm_first):
    # The compiled export of a model trained with --mixed-precision: every
    # kernel is cast to the compute dtype (the cross-attention projections
    # once were not, and the program failed to build).
    import keras

    keras.config.set_dtype_policy("mixed_bfloat16")
    model = _model({"norm_first": norm_first})
    lean = LeanStep(model, tf.nest.map_structure(tf.Variable, LeanStep.concatenate_weights(model)))
    context = tf.constant([[5, 6, 7, 8, 0]], tf.int32)
    first = _first_logits(lean)
    want, _ = model.decode_step(tf.constant([START_ID]), 0, model.init_decoding_state(context, 4))
    got = first(context)
    assert got.dtype == tf.float32
    np.testing.assert_allclose(got, np.asarray(want, np.float32), atol=5e-2)


def test_given_concatenations_are_what_the_step_reads():
    # Zeroing the given kernels must change the logits: the step reads
    # them, not the model's own kernels.
    model = _model({})
    given = tf.nest.map_structure(tf.Variable, LeanStep.concatenate_weights(model))
    lean = LeanStep(model, given)
    context = tf.constant([[5, 6, 7, 8]], tf.int32)
    first = _first_logits(lean)
    before = first(context).numpy()
    for name in ("encoder_query_key_value", "decoder_query_key_value"):
        given[name][0]["kernel"].assign(tf.zeros_like(given[name][0]["kernel"]))
        after = first(context).numpy()
        assert np.abs(after - before).max() > 1e-3, name
        before = after


def test_the_compiled_translator_holds_the_concatenations():
    model = _model({"norm_first": True})
    want = LeanStep.concatenate_weights(model)
    translator = Translator(model, None, None, jit_compile=True)
    got = translator.lean_weights
    assert len(got["encoder_query_key_value"]) == len(model.encoder.blocks)
    assert got["decoder_query_key_value"][1]["kernel"].shape == (32, 3 * 32)
    for w, g in zip(tf.nest.flatten(want), tf.nest.flatten(got)):
        assert isinstance(g, tf.Variable) and not g.trainable
        np.testing.assert_array_equal(g, w)
    # Tracked by the module, so exported with it.
    tracked = {id(v) for v in translator.variables}
    assert all(id(g) in tracked for g in tf.nest.flatten(got))
    assert not hasattr(Translator(model, None, None), "lean_weights")


def test_compiled_sampling_of_the_top_token_is_greedy_search():
    model = _model({}, seed=3)
    translator = Translator(model, None, None, jit_compile=True, batch_sizes=(2,),
                            max_output_length=8, sampling_topk=1)  # fmt: skip
    context = tf.constant(np.random.default_rng(0).integers(4, VOCAB, size=(3, 5)), tf.int32)
    want, want_scores = translator._search(context, 1)
    got, got_scores = translator._search(context, 1, sample=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got_scores, want_scores, atol=1e-5)


@pytest.mark.parametrize(
    "batch_sizes, programs, rows",
    [((2,), [1], 4), ((1, 4), [1, 2], 7), ((3,), [2], 5)],
    ids=["chunks of 2 as two programs of 1", "halves of 4 and one row", "odd halves"],
)
def test_chunks_run_as_two_programs_with_the_results_of_one(batch_sizes, programs, rows):
    # Each row's search is its own: splitting a chunk in two programs, and
    # padding each half, changes no row's tokens and no score beyond 1e-4.
    model = _model({}, seed=4)
    options = dict(max_output_length=8, beam_size=2)
    plain = Translator(model, None, None, **options)
    compiled = Translator(model, None, None, jit_compile=True, batch_sizes=batch_sizes,
                          lengths=(8,), **options)  # fmt: skip
    assert compiled.program_batch_sizes == programs
    context = tf.constant(np.random.default_rng(4).integers(4, VOCAB, size=(rows, 5)), tf.int32)
    for beams in (2, 1):
        want, want_scores = plain._search(context, beams)
        got, got_scores = compiled._search(context, beams)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_allclose(got_scores, want_scores, atol=1e-4)


def test_compiled_sampling_draws_apart_in_every_program():
    # Four copies of one source in four programs of one row (chunks of 2,
    # split in halves): with one seed for all, the programs would draw
    # alike; each draws with the request's seed and its first row.
    model = _model({}, seed=5)
    translator = Translator(model, None, None, jit_compile=True, batch_sizes=(2,),
                            max_output_length=8)  # fmt: skip
    context = tf.constant(np.tile([[7, 9, 11, 2]], [4, 1]), tf.int32)
    first, _ = translator._search(context, 1, sample=True, seed=5)
    again, _ = translator._search(context, 1, sample=True, seed=5)
    np.testing.assert_array_equal(first, again)
    assert len({tuple(row) for row in first.numpy()[:, 0]}) == 4


def test_the_shapes_are_validated_and_listed():
    model = _model({})
    with pytest.raises(ValueError, match="batch_sizes"):
        Translator(model, None, None, jit_compile=True, batch_sizes=(0, 4))
    translator = Translator(model, None, None, jit_compile=True, max_input_length=40,
                            max_output_length=20)  # fmt: skip
    assert translator.lengths == [16, 24, 32, 40]
    # Chunks of 8 and 32 rows run as two programs of 4 and 16 at once.
    assert translator.program_batch_sizes == [1, 4, 16]
    assert translator.compiled_shapes[0] == (1, 16) and len(translator.compiled_shapes) == 12
    assert len(translator.compiled_searches) == 4
    # One beam is greedy search: the two signatures share one program.
    greedy_only = Translator(model, None, None, beam_size=1, jit_compile=True)
    assert greedy_only.compiled_searches == ["greedy search", "sampling", "scoring pass"]


def test_grown_caches_keep_what_was_written():
    model = _model({})
    lean = LeanStep(model)
    rng = np.random.default_rng(4)
    cache = tf.constant(rng.normal(size=(2, model.num_heads, 5, 8)), tf.float32)
    state = {"self_attention_cache": ((cache, cache + 1),), "other": tf.ones([2])}
    grown = lean.grow_state(state, 9)
    keys, values = grown["self_attention_cache"][0]
    assert keys.shape == (2, model.num_heads, 9, 8)
    np.testing.assert_array_equal(keys[:, :, :5], cache)
    np.testing.assert_array_equal(values[:, :, :5], cache + 1)
    np.testing.assert_array_equal(keys[:, :, 5:], 0)
    assert grown["other"] is state["other"]
    np.testing.assert_array_equal(lean.grow_state(state, 3)["self_attention_cache"][0][0],
                                  cache[:, :, :3])  # fmt: skip


def test_start_token_is_where_the_search_starts():
    # LeanStep's first step reads position 0, as decode_step does.
    model = _model({})
    lean = LeanStep(model)
    first = _first_logits(lean)
    context = tf.constant([[5, 6, 7]], tf.int32)
    want, _ = model.decode_step(tf.constant([START_ID]), 0, model.init_decoding_state(context, 4))
    np.testing.assert_allclose(first(context), want, atol=1e-4)
