import keras
import numpy as np
import pytest

from keras_transformer.layers import EncoderBlock, PositionalEmbedding
from tests.backends import assert_allclose, to_numpy
from tests.layers import blocks_reference

D, HEADS, DFF = 16, 4, 24


def _randomize(layer, rng):
    layer.set_weights(
        [
            rng.normal(size=w.shape) * 0.3 + (1.0 if "gamma" in w.path else 0.0)
            for w in layer.weights
        ]
    )


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("lengths", [[6, 6], [6, 2]])
def test_matches_numpy_reference(rng, norm_first, lengths):
    block = EncoderBlock(D, HEADS, DFF, dropout=0.3, norm_first=norm_first)
    x = rng.normal(size=(2, 6, D)).astype("float32")
    block(x)
    _randomize(block, rng)
    padding = np.arange(6)[None] < np.array(lengths)[:, None]
    out = to_numpy(block(x, mask=padding))
    expected = blocks_reference.encoder_block(block, x, padding)
    assert_allclose(out[padding], expected[padding], atol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_extra_padding_never_changes_outputs(rng, norm_first, policy):
    keras.config.set_dtype_policy(policy)
    embed = PositionalEmbedding(30, D)
    block = EncoderBlock(D, HEADS, DFF, norm_first=norm_first)
    ids = rng.integers(1, 30, (2, 5))
    ids[1, 3:] = 0
    padded = np.concatenate([ids, np.zeros((2, 4), int)], 1)
    a = to_numpy(block(embed(ids))).astype(np.float32)
    b = to_numpy(block(embed(padded))).astype(np.float32)
    atol = 1e-2 if policy == "mixed_float16" else 1e-5
    assert_allclose(a[ids != 0], b[:, :5][ids != 0], atol=atol)


def test_explicit_attention_mask_with_keras_mask(rng):
    block = EncoderBlock(D, HEADS, DFF, dropout=0.0)
    x = rng.normal(size=(1, 4, D)).astype("float32")
    padding = np.array([[True, True, True, False]])
    allow_all = np.ones((1, 4, 4), bool)
    a = block(x, mask=padding)
    b = block(x, attention_mask=allow_all, inputs_mask=padding)
    assert_allclose(a, b, atol=1e-6)


def test_in_functional_model_with_masking():
    inputs = keras.Input((None,), dtype="int32")
    x = PositionalEmbedding(30, D)(inputs)
    x = EncoderBlock(D, HEADS, DFF)(x)
    outputs = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, outputs)
    ids = np.array([[4, 5, 6, 0, 0]])
    assert_allclose(model(ids), model(ids[:, :3]), atol=1e-5)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(d_model=10, num_heads=3, dff=8), "divisible"),
        (dict(d_model=0, num_heads=1, dff=8), "d_model"),
        (dict(d_model=8, num_heads=2, dff=8, dropout=2.0), "dropout"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EncoderBlock(**kwargs)


def test_wrong_input_depth():
    with pytest.raises(ValueError, match="d_model=8"):
        EncoderBlock(8, 2, 16)(np.ones((1, 3, 6), "float32"))


@pytest.mark.parametrize("norm_first", [False, True])
def test_returns_the_self_attention_weights_of_the_reference(rng, norm_first):
    block = EncoderBlock(D, HEADS, DFF, dropout=0.0, norm_first=norm_first)
    x = rng.normal(size=(2, 6, D)).astype("float32")
    block(x)
    _randomize(block, rng)
    padding = np.arange(6)[None] < np.array([6, 3])[:, None]
    out, scores = block(x, mask=padding, return_attention_scores=True)
    # Padded positions see no key: with scores they attend to nothing, as
    # keras.layers.MultiHeadAttention; the tokens' outputs are the same.
    assert_allclose(to_numpy(out)[padding], to_numpy(block(x, mask=padding))[padding], atol=1e-6)
    # The weights of what self-attention reads: the input, or its norm.
    h = to_numpy(block.self_attention_norm(x)) if norm_first else x
    mask = padding[:, :, None] & padding[:, None, :]
    from tests import reference

    expected = reference.mha_probs(h, h, reference.mha_weights(block.self_attention), mask)
    assert_allclose(scores, expected, atol=1e-5)
