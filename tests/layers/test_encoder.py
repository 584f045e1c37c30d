import keras
import numpy as np
import pytest

from keras_transformer.layers import Encoder, PositionalEmbedding
from tests.backends import assert_allclose


@pytest.mark.parametrize("norm_first", [False, True])
def test_stack_applies_blocks_in_order(rng, norm_first):
    encoder = Encoder(3, 16, 4, 32, dropout=0.0, norm_first=norm_first)
    x = rng.normal(size=(2, 5, 16)).astype("float32")
    padding = np.array([[True] * 5, [True] * 2 + [False] * 3])
    out = encoder(x, mask=padding)
    expected = x
    for block in encoder.blocks:
        expected = block(expected, mask=padding)
    if norm_first:
        expected = encoder.final_norm(expected)
    assert_allclose(out, expected, atol=1e-5)
    assert len(encoder.blocks) == 3 and (encoder.final_norm is not None) == norm_first


def test_functional_model_saves_and_loads(tmp_path, rng):
    inputs = keras.Input((None,), dtype="int32")
    x = PositionalEmbedding(40, 16)(inputs)
    x = Encoder(2, 16, 4, 32)(x)
    outputs = keras.layers.Dense(3)(keras.layers.GlobalAveragePooling1D()(x))
    model = keras.Model(inputs, outputs)
    ids = rng.integers(1, 40, (3, 6))
    ids[0, 4:] = 0
    path = tmp_path / "encoder.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert_allclose(restored(ids), model(ids), atol=1e-6)


def test_invalid_num_layers():
    with pytest.raises(ValueError, match="num_layers"):
        Encoder(0, 16, 4, 32)


def test_returns_the_last_block_s_attention_weights(rng):
    encoder = Encoder(2, d_model=8, num_heads=2, dff=16, dropout=0.0)
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    out, scores = encoder(x, return_attention_scores=True)
    assert_allclose(out, encoder(x), atol=1e-6)
    first = encoder.blocks[0](x)
    _, expected = encoder.blocks[1](first, return_attention_scores=True)
    assert_allclose(scores, expected, atol=1e-6)
    assert tuple(scores.shape) == (2, 2, 5, 5)
