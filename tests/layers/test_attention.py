import warnings

import keras
import numpy as np
import pytest

from keras_transformer.layers import MultiHeadAttention
from tests import reference
from tests.backends import assert_allclose, assert_array_equal, tensorflow_only, to_numpy

BATCH, TQ, TK, DIM, HEADS, KEY_DIM = 3, 5, 7, 12, 3, 4


def _masked(x, mask):
    """A tensor carrying a Keras mask, as an Embedding(mask_zero=True) gives."""
    inputs = keras.Input(shape=x.shape[1:])
    model = keras.Model(inputs, keras.layers.Masking(mask_value=-99.0)(inputs))
    x = np.where(mask[..., None], x, -99.0) if mask is not None else x
    return model(x), x


def _padding(lengths, total):
    return np.arange(total)[None, :] < np.array(lengths)[:, None]


MASK_CASES = {
    "none": dict(),
    "query": dict(query=[5, 3, 1]),
    "value": dict(value=[7, 4, 2]),
    "both": dict(query=[5, 2, 4], value=[3, 7, 1]),
    "explicit": dict(explicit=True),
    "causal": dict(causal=True),
    "all": dict(query=[5, 2, 4], value=[3, 7, 1], explicit=True, causal=True),
}


def _inputs(rng, case, self_attention):
    tk = TQ if self_attention else TK
    query = rng.normal(size=(BATCH, TQ, DIM)).astype("float32")
    value = query if self_attention else rng.normal(size=(BATCH, tk, DIM)).astype("float32")
    qmask = _padding(case["query"], TQ) if "query" in case else None
    vmask = _padding(case["value"], tk) if "value" in case and not self_attention else None
    if self_attention and "query" in case:
        vmask = qmask
    explicit = rng.random((BATCH, TQ, tk)) > 0.3 if case.get("explicit") else None
    return query, value, qmask, vmask, explicit


def _pair(rng):
    ref = keras.layers.MultiHeadAttention(HEADS, KEY_DIM)
    ours = MultiHeadAttention(HEADS, KEY_DIM)
    x = np.zeros((1, TQ, DIM), "float32")
    ref(x, x)
    ours(x, x)
    ours.set_weights([rng.normal(size=w.shape) * 0.5 for w in ours.get_weights()])
    ref.set_weights(ours.get_weights())
    return ours, ref


def _visible(case, qmask, vmask, explicit, tk):
    """Which keys each query sees, `[batch, query, key]`: the product of
    every mask the case gives."""
    mask = np.ones((BATCH, TQ, tk), bool)
    if qmask is not None:
        mask &= qmask[:, :, None]
    if vmask is not None:
        mask &= vmask[:, None, :]
    if explicit is not None:
        mask &= explicit
    if case.get("causal"):
        mask &= np.tril(np.ones((TQ, tk), bool))[None]
    return mask


@pytest.mark.parametrize("case_name", sorted(MASK_CASES))
@pytest.mark.parametrize("self_attention", [True, False])
@pytest.mark.parametrize("scores", [False, True])
def test_matches_keras_multi_head_attention(rng, case_name, self_attention, scores):
    case = MASK_CASES[case_name]
    ours, ref = _pair(rng)
    query, value, qmask, vmask, explicit = _inputs(rng, case, self_attention)
    results = []
    for layer in (ours, ref):
        q, _ = _masked(query, qmask)
        v, _ = _masked(value, vmask) if not self_attention else (q, None)
        results.append(
            layer(
                q,
                v,
                attention_mask=explicit,
                use_causal_mask=case.get("causal", False),
                return_attention_scores=scores,
            )
        )
    # A query that sees no key (padding, or masked out) has no defined
    # output: Keras's reference gives a uniform attention on a CPU but
    # another value through PyTorch's fused attention on a GPU. Those rows
    # are compared with the NumPy reference below.
    seen = _visible(case, qmask, vmask, explicit, TQ if self_attention else TK).any(-1)
    if scores:
        assert_allclose(to_numpy(results[0][0])[seen], to_numpy(results[1][0])[seen], atol=1e-5)
        assert_allclose(to_numpy(results[0][1]), to_numpy(results[1][1]), atol=1e-5)
    else:
        assert_allclose(to_numpy(results[0])[seen], to_numpy(results[1])[seen], atol=1e-5)


def test_weights_transfer_both_ways(rng):
    ours, ref = _pair(rng)
    assert [w.shape for w in ours.get_weights()] == [w.shape for w in ref.get_weights()]
    fresh = keras.layers.MultiHeadAttention(HEADS, KEY_DIM)
    x = rng.normal(size=(2, TQ, DIM)).astype("float32")
    fresh(x, x)
    fresh.set_weights(ours.get_weights())
    assert_allclose(fresh(x, x), ours(x, x), atol=1e-5)


@pytest.mark.parametrize("case_name", ["none", "both", "all"])
def test_matches_numpy_reference(rng, case_name):
    case = MASK_CASES[case_name]
    ours, _ = _pair(rng)
    query, value, qmask, vmask, explicit = _inputs(rng, case, self_attention=False)
    out, _ = ours(
        query,
        value,
        attention_mask=explicit,
        use_causal_mask=case.get("causal", False),
        query_mask=qmask,
        value_mask=vmask,
        return_attention_scores=True,
    )
    mask = _visible(case, qmask, vmask, explicit, TK)
    assert not mask.any(-1).all() or case_name == "none"  # fully masked rows are checked here
    expected = reference.mha(query, value, reference.mha_weights(ours), mask)
    assert_allclose(out, expected, atol=1e-4)


def test_output_carries_query_mask(rng):
    ours, _ = _pair(rng)
    qmask = _padding([5, 3, 1], TQ)
    q, _ = _masked(rng.normal(size=(BATCH, TQ, DIM)).astype("float32"), qmask)
    out = ours(q, q)
    assert_array_equal(out._keras_mask, qmask)


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
@pytest.mark.parametrize("dropout,training", [(0.0, False), (0.5, True)])
@pytest.mark.parametrize("scores", [False, True])
def test_fully_masked_rows_are_finite(rng, policy, dropout, training, scores):
    keras.config.set_dtype_policy(policy)
    layer = MultiHeadAttention(HEADS, KEY_DIM, dropout=dropout)
    query = rng.normal(size=(BATCH, TQ, DIM)).astype("float32")
    mask = np.ones((BATCH, TQ, TQ), bool)
    mask[:, 1, :] = False  # query 1 may attend to nothing
    mask[0] = False  # nor may any query of row 0
    out = layer(
        query, query, attention_mask=mask, training=training, return_attention_scores=scores
    )
    out = out[0] if scores else out
    assert np.all(np.isfinite(to_numpy(out)))


def test_padding_never_changes_unpadded_outputs(rng):
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    query = rng.normal(size=(2, 4, DIM)).astype("float32")
    value = rng.normal(size=(2, 6, DIM)).astype("float32")
    base = layer(query, value, value_mask=np.ones((2, 6), bool))
    padded_value = np.concatenate([value, rng.normal(size=(2, 3, DIM))], 1).astype("float32")
    vmask = np.concatenate([np.ones((2, 6)), np.zeros((2, 3))], 1).astype(bool)
    padded_query = np.concatenate([query, rng.normal(size=(2, 2, DIM))], 1).astype("float32")
    qmask = np.concatenate([np.ones((2, 4)), np.zeros((2, 2))], 1).astype(bool)
    out = layer(padded_query, padded_value, query_mask=qmask, value_mask=vmask)
    assert_allclose(out[:, :4], base, atol=1e-5)


def test_causal_future_never_changes_past(rng):
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    x = rng.normal(size=(2, 6, DIM)).astype("float32")
    y = x.copy()
    y[:, 4:] = rng.normal(size=(2, 2, DIM))
    a = layer(x, x, use_causal_mask=True)
    b = layer(y, y, use_causal_mask=True)
    assert_allclose(a[:, :4], b[:, :4], atol=1e-6)
    assert np.abs(to_numpy(a[:, 4:]) - to_numpy(b[:, 4:])).max() > 1e-3


def _count_fused(layer):
    """A list whose one item counts the layer's fused projections."""
    count, fuse = [0], layer._query_key_value

    def counted(x):
        count[0] += 1
        return fuse(x)

    layer._query_key_value = counted
    return count


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("use_causal_mask", [True, False])
def test_self_attention_cache_equals_full_causal_pass(rng, use_causal_mask, compiled):
    # Compiled: writes in place and one fused projection (JAX and PyTorch
    # run it eagerly; TensorFlow needs XLA for it, tested below).
    if compiled and keras.backend.backend() == "tensorflow":
        pytest.skip("a dynamic-update-slice needs XLA on TensorFlow (tested compiled below)")
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    length = 6
    x = keras.ops.convert_to_tensor(rng.normal(size=(BATCH, length, DIM)).astype("float32"))
    full, full_scores = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    fused = _count_fused(layer)
    cache = layer.init_cache(BATCH, length + 2)
    assert [tuple(part.shape) for part in cache] == [(BATCH, HEADS, length + 2, KEY_DIM)] * 2
    for i in range(length):
        step = x[:, i : i + 1]
        out, scores, cache = layer(
            step,
            step,
            cache=cache,
            cache_index=i,
            compiled=compiled,
            return_attention_scores=True,
            use_causal_mask=use_causal_mask,
        )
        assert_allclose(out[:, 0], full[:, i], atol=1e-5)
        assert_allclose(scores[:, :, 0, :length], full_scores[:, :, i], atol=1e-5)
    # Untouched positions stay empty.
    for part in cache:
        assert_array_equal(to_numpy(part)[:, :, length:], 0.0)
    assert fused == ([length] if compiled else [0])


def test_several_positions_written_at_once_equal_one_by_one(rng):
    # A prefix decoded in one call (e.g. a forced prefix), then one step.
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    x = rng.normal(size=(BATCH, 5, DIM)).astype("float32")
    full = layer(x, x, use_causal_mask=True)
    out, cache = layer(x[:, :3], x[:, :3], cache=layer.init_cache(BATCH, 7), cache_index=0)
    assert_allclose(out, full[:, :3], atol=1e-5)
    out, cache = layer(x[:, 3:], x[:, 3:], cache=cache, cache_index=3)
    assert_allclose(out, full[:, 3:], atol=1e-5)
    assert_array_equal(to_numpy(cache[0])[:, :, 5:], 0.0)


@tensorflow_only
@pytest.mark.parametrize("use_bias", [True, False])
def test_compiled_steps_under_xla_equal_the_graphs(rng, use_bias):
    import tensorflow as tf

    layer = MultiHeadAttention(HEADS, KEY_DIM, use_bias=use_bias)
    x = tf.constant(rng.normal(size=(BATCH, 4, DIM)).astype("float32"))
    layer(x, x)
    fused = _count_fused(layer)

    def run(compiled):
        cache = layer.init_cache(BATCH, 6)
        outs = []
        for i in range(4):
            step = x[:, i : i + 1]
            out, cache = layer(step, step, cache=cache, cache_index=i, compiled=compiled)
            outs.append(out)
        return tf.concat(outs, axis=1), cache

    plain = tf.function(lambda: run(False))()
    compiled = tf.function(lambda: run(True), jit_compile=True)()
    assert fused == [4]  # traced once, four steps
    assert_allclose(compiled[0], plain[0], atol=1e-5)
    for a, b in zip(compiled[1], plain[1]):
        assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("beams", [1, 3])
@pytest.mark.parametrize("query_length", [1, 2])
def test_beams_share_an_untiled_cross_attention_cache(rng, beams, query_length):
    # The beams of a source row read its encoder keys and values once: the
    # same numbers as the cache tiled over beams, row by row.
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    memory = rng.normal(size=(BATCH, TK, DIM)).astype("float32")
    query = rng.normal(size=(BATCH * beams, query_length, DIM)).astype("float32")
    vmask = _padding([7, 4, 2], TK)
    qmask = rng.random((BATCH * beams, query_length)) > 0.3
    layer(query[:BATCH], memory)
    tiled_memory = np.repeat(memory, beams, axis=0)
    expected, expected_scores = layer(
        query, tiled_memory, query_mask=qmask, value_mask=np.repeat(vmask, beams, axis=0),
        return_attention_scores=True,
    )  # fmt: skip
    out, scores, _ = layer(
        query, memory, cache=layer.precompute_cache(memory), query_mask=qmask,
        value_mask=vmask, return_attention_scores=True,
    )  # fmt: skip
    assert_allclose(out, expected, atol=1e-5)
    assert_allclose(scores, expected_scores, atol=1e-5)


@tensorflow_only
def test_self_attention_cache_in_a_compiled_loop(rng):
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    x = rng.normal(size=(BATCH, 5, DIM)).astype("float32")
    full = layer(x, x, use_causal_mask=True)

    import tensorflow as tf

    @tf.function(jit_compile=False)
    def run(x):
        def body(i, cache, outs):
            step = tf.gather(x, [i], axis=1)
            out, cache = layer(step, step, cache=cache, cache_index=i)
            return i + 1, cache, outs.write(i, out[:, 0])

        _, _, outs = tf.while_loop(
            lambda i, *_: i < 5,
            body,
            (0, layer.init_cache(BATCH, 5), tf.TensorArray(tf.float32, 5)),
        )
        return tf.transpose(outs.stack(), [1, 0, 2])

    assert_allclose(run(x), full, atol=1e-5)


def test_cross_attention_cache_is_computed_once_and_reused(rng):
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    query = rng.normal(size=(BATCH, 3, DIM)).astype("float32")
    memory = rng.normal(size=(BATCH, TK, DIM)).astype("float32")
    vmask = _padding([7, 4, 2], TK)
    expected = layer(query, memory, value_mask=vmask)
    cache = layer.precompute_cache(memory)
    out, same_cache = layer(query, memory, cache=cache, value_mask=vmask)
    assert_allclose(out, expected, atol=1e-5)
    for same, part in zip(same_cache, cache):
        assert_array_equal(same, part)
    # The cache, not the value, is read: keys and values are not recomputed.
    out_again, _ = layer(query, np.zeros_like(memory), cache=cache, value_mask=vmask)
    assert_allclose(out_again, expected, atol=1e-5)


@pytest.mark.parametrize("case_name", ["none", "query", "value", "both", "explicit", "all"])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_single_query_cached_path_matches_general_path(rng, case_name, dropout, policy):
    """A cached one-query call agrees with the uncached call."""
    case = MASK_CASES[case_name]
    keras.config.set_dtype_policy(policy)
    try:
        layer = MultiHeadAttention(HEADS, KEY_DIM, dropout=dropout)
        memory = rng.normal(size=(BATCH, TK, DIM)).astype("float32")
        layer(memory[:, :1], memory)
        layer.set_weights([rng.normal(size=w.shape) * 0.5 for w in layer.get_weights()])
        cache = layer.precompute_cache(memory)
        atol = 1e-5 if policy == "float32" else 2e-2
        for position in range(TQ):
            query = rng.normal(size=(BATCH, 1, DIM)).astype("float32")
            qmask = (
                _padding(case["query"], TQ)[:, position : position + 1] if "query" in case else None
            )
            vmask = _padding(case["value"], TK) if "value" in case else None
            explicit = rng.random((BATCH, 1, TK)) > 0.5 if case.get("explicit") else None
            args = dict(
                attention_mask=explicit,
                query_mask=qmask,
                value_mask=vmask,
                return_attention_scores=True,
            )
            expected, expected_scores = layer(query, memory, **args)
            out, scores, _ = layer(query, memory, cache=cache, **args)
            assert_allclose(out, expected, atol=atol)
            assert_allclose(scores, expected_scores, atol=atol)
            plain = layer(
                query,
                memory,
                cache=cache,
                attention_mask=explicit,
                query_mask=qmask,
                value_mask=vmask,
            )[0]
            expected = layer(
                query, memory, attention_mask=explicit, query_mask=qmask, value_mask=vmask
            )
            assert_allclose(plain, expected, atol=atol)
            assert np.all(np.isfinite(to_numpy(plain)))
    finally:
        keras.config.set_dtype_policy("float32")


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_heads=0, key_dim=4), "num_heads"),
        (dict(num_heads=2, key_dim=-1), "key_dim"),
        (dict(num_heads=2, key_dim=4, value_dim=0), "value_dim"),
        (dict(num_heads=2, key_dim=4, dropout=1.5), "dropout"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(**kwargs)


def test_cache_holds_keys_and_values_of_their_own_sizes(rng):
    layer = MultiHeadAttention(2, 4, value_dim=6)
    keys, values = layer.init_cache(1, 4)
    assert (tuple(keys.shape), tuple(values.shape)) == ((1, 2, 4, 4), (1, 2, 4, 6))
    x = rng.normal(size=(1, 3, DIM)).astype("float32")
    full = layer(x, x, use_causal_mask=True)
    cache = (keys, values)
    for i in range(3):
        out, cache = layer(x[:, i : i + 1], x[:, i : i + 1], cache=cache, cache_index=i)
        assert_allclose(out[:, 0], full[:, i], atol=1e-5)


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("scores", [False, True])
def test_one_key_attends_fully_without_a_warning(rng, masked, scores):
    # A one-piece sentence, or a first decoding step run as a full pass:
    # a softmax over one key is 1, and Keras' warning that a softmax over
    # an axis of size 1 is "likely not what you intended" does not apply.
    ours, _ = _pair(rng)
    query = rng.normal(size=(BATCH, TQ, DIM)).astype("float32")
    value = rng.normal(size=(BATCH, 1, DIM)).astype("float32")
    vmask = np.array([[True], [False], [True]]) if masked else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ours(query, value, value_mask=vmask, return_attention_scores=scores)
    assert not [w for w in caught if "softmax" in str(w.message)]
    out, weights = result if scores else (result, None)
    mask = np.ones((BATCH, TQ, 1), bool) if vmask is None else np.repeat(vmask[:, None], TQ, 1)
    # Without scores or dropout a fully masked row attends uniformly (here,
    # to its one key), as keras.layers.MultiHeadAttention does; with scores
    # it attends to nothing, as the reference.
    attended = mask if scores else np.ones_like(mask)
    expected = reference.mha(query, value, reference.mha_weights(ours), attended)
    assert_allclose(out, expected, atol=1e-4)
    if scores:
        expected_weights = np.broadcast_to(mask[:, None].astype("float32"), (BATCH, HEADS, TQ, 1))
        assert_allclose(weights, expected_weights, atol=1e-6)


@pytest.mark.parametrize("use_bias", [True, False])
def test_weights_by_role_name_every_weight_once(use_bias):
    layer = MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3, use_bias=use_bias)
    with pytest.raises(ValueError, match="before it is built"):
        layer.weights_by_role()
    layer(keras.ops.ones((1, 5, 8)), keras.ops.ones((1, 6, 7)))
    roles = layer.weights_by_role()
    assert sorted(id(v) for v in roles.values()) == sorted(id(v) for v in layer.weights)
    assert {k: tuple(v.shape) for k, v in roles.items() if k.endswith("kernel")} == {
        "query_kernel": (8, 2, 4), "key_kernel": (7, 2, 4), "value_kernel": (7, 2, 3),
        "output_kernel": (2, 3, 8),
    }  # fmt: skip
    assert any(k.endswith("bias") for k in roles) == use_bias


@pytest.fixture
def fused_calls(monkeypatch):
    """How many times the layers call `keras.ops.dot_product_attention`."""
    calls = []
    fused = keras.ops.dot_product_attention

    def counted(*args, **kwargs):
        calls.append(kwargs.get("is_causal", False))
        return fused(*args, **kwargs)

    monkeypatch.setattr(keras.ops, "dot_product_attention", counted)
    return calls


FUSED_CASES = {
    # name: (layer arguments, call arguments, fused on a backend with a kernel)
    "inference": ({}, {}, True),
    "causal": ({}, {"use_causal_mask": True}, True),
    "training without dropout": ({}, {"training": True}, True),
    "inference with dropout": ({"dropout": 0.5}, {}, True),
    "training with dropout": ({"dropout": 0.5}, {"training": True}, False),
    "scores": ({}, {"return_attention_scores": True}, False),
    "values wider than keys": ({"value_dim": KEY_DIM + 2}, {}, False),
}


@pytest.mark.parametrize("case", sorted(FUSED_CASES))
def test_the_fused_kernel_runs_where_it_computes_the_same(rng, fused_calls, case):
    arguments, call, fused = FUSED_CASES[case]
    layer = MultiHeadAttention(HEADS, KEY_DIM, **arguments)
    x = rng.normal(size=(BATCH, TQ, DIM)).astype("float32")
    layer(x, x, **call)
    expected = fused and keras.config.backend() != "tensorflow"
    assert len(fused_calls) == int(expected)
    if expected:  # a causal mask alone: the kernel's own causal skip
        assert fused_calls == [case == "causal"]


def test_the_cached_step_keeps_the_einsums(rng, fused_calls):
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    x = rng.normal(size=(BATCH, 1, DIM)).astype("float32")
    layer(x, x, cache=layer.init_cache(BATCH, TQ), cache_index=0)
    assert fused_calls == []


@pytest.mark.parametrize("case_name", sorted(MASK_CASES))
@pytest.mark.parametrize("self_attention", [True, False])
@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_the_fused_path_equals_the_einsum_path(rng, case_name, self_attention, dropout):
    """Without scores (fused where the backend has a kernel) against the
    same call with scores (always the einsums), inference: equal to 1e-5
    on every query that sees a key; one that sees none gets the mean of
    the values without dropout (the einsums' softmax over equal logits) and
    zeros with it (the einsums zero masked weights there), as before."""
    case = MASK_CASES[case_name]
    ours, _ = _pair(rng)
    layer = MultiHeadAttention(HEADS, KEY_DIM, dropout=dropout)
    layer(np.zeros((1, TQ, DIM), "float32"), np.zeros((1, TQ, DIM), "float32"))
    layer.set_weights(ours.get_weights())
    query, value, qmask, vmask, explicit = _inputs(rng, case, self_attention)
    tk = TQ if self_attention else TK
    explicit = explicit if explicit is not None else np.ones((BATCH, TQ, tk), bool)
    explicit[0, 1] = False  # a query that sees no key, in every case
    arguments = dict(attention_mask=explicit, use_causal_mask=case.get("causal", False),
                     query_mask=qmask, value_mask=vmask)  # fmt: skip
    fused = to_numpy(layer(query, value, **arguments))
    einsum, _ = layer(query, value, return_attention_scores=True, **arguments)
    seen = _visible(case, qmask, vmask, explicit, tk).any(-1)
    assert_allclose(fused[seen], to_numpy(einsum)[seen], atol=1e-5)
    w = reference.mha_weights(layer)
    if dropout:  # attends to nothing: the output bias alone
        expected = np.broadcast_to(w["output_bias"], fused.shape)
    else:  # attends to every key alike
        v = np.einsum("bsd,dnh->bsnh", value, w["value_kernel"]) + w["value_bias"]
        mean = v.mean(axis=1, keepdims=True)  # [batch, 1, heads, dim]
        expected = np.einsum("btnh,nhd->btd", mean, w["output_kernel"]) + w["output_bias"]
        expected = np.broadcast_to(expected, fused.shape)
    assert_allclose(fused[~seen], expected[~seen], atol=1e-5)
