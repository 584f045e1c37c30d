import keras
import numpy as np
import pytest

from keras_transformer.layers import PositionalEmbedding
from tests import reference


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("start_index", [0, 3])
def test_sinusoidal_embedding_matches_formula(scale, start_index):
    layer = PositionalEmbedding(20, 8, max_length=16, scale_embeddings=scale)
    ids = np.array([[3, 4, 5, 0], [7, 1, 0, 0]])
    out = np.array(layer(ids, start_index=start_index))
    table = np.array(layer.embeddings)
    factor = np.sqrt(8) if scale else 1.0
    pe = reference.position_encoding(16, 8)[start_index : start_index + 4]
    np.testing.assert_allclose(out, table[ids] * factor + pe[None], atol=1e-5)


def test_learned_positions():
    layer = PositionalEmbedding(20, 8, max_length=10, position_encoding="learned")
    ids = np.array([[3, 4, 5]])
    out = np.array(layer(ids, start_index=2))
    positions = np.array(layer.position_embedding.embeddings)
    expected = np.array(layer.embeddings)[ids] * np.sqrt(8) + positions[2:5][None]
    np.testing.assert_allclose(out, expected, atol=1e-5)


@pytest.mark.parametrize("mask_zero", [True, False])
def test_mask_is_nonzero_ids(mask_zero):
    layer = PositionalEmbedding(20, 8, mask_zero=mask_zero)
    ids = np.array([[3, 0, 5, 0]])
    mask = layer.compute_mask(ids)
    if mask_zero:
        np.testing.assert_array_equal(mask, ids != 0)
        np.testing.assert_array_equal(layer(ids)._keras_mask, ids != 0)
    else:
        assert mask is None


def test_mask_propagates_in_a_functional_model():
    inputs = keras.Input((None,), dtype="int32")
    x = PositionalEmbedding(20, 8)(inputs)
    pooled = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, pooled)
    ids = np.array([[3, 4, 0, 0]])
    expected = np.array(PositionalEmbedding.__call__(model.layers[1], ids))[:, :2].mean(1)
    np.testing.assert_allclose(model(ids), expected, atol=1e-5)


def test_too_long_sequence_is_a_clear_error():
    layer = PositionalEmbedding(20, 8, max_length=4)
    with pytest.raises(ValueError, match="max_length=4"):
        layer(np.ones((1, 5), "int32"))
    with pytest.raises(ValueError, match="max_length=4"):
        layer(np.ones((1, 2), "int32"), start_index=3)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(vocab_size=0, d_model=4), "vocab_size"),
        (dict(vocab_size=4, d_model=None), "d_model"),
        (dict(vocab_size=4, d_model=4, max_length=0), "max_length"),
        (dict(vocab_size=4, d_model=4, position_encoding="rotary"), "position_encoding"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PositionalEmbedding(**kwargs)
