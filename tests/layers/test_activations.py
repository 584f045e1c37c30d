import keras
import numpy as np
import pytest

from keras_transformer.layers import FeedForward, gelu_tanh
from tests.backends import assert_allclose


def _reference(x):
    # The paper's formula in NumPy, float64.
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize("scale", [0.5, 3.0, 30.0])
def test_gelu_tanh_is_the_formula(rng, scale):
    x = (rng.normal(size=(4, 7)) * scale).astype("float32")
    assert_allclose(gelu_tanh(keras.ops.convert_to_tensor(x)), _reference(x.astype("f8")),
                    atol=1e-5, rtol=1e-5)  # fmt: skip
    # Not the exact GELU: they differ by up to about 5e-4 near |x| = 2.
    exact = keras.activations.gelu(keras.ops.convert_to_tensor(x), approximate=False)
    if scale == 3.0:
        assert np.abs(np.asarray(keras.ops.convert_to_numpy(exact)) - _reference(x)).max() > 1e-5


@pytest.mark.parametrize("activation", ["keras_transformer>gelu_tanh", gelu_tanh])
def test_a_layer_saves_it_by_name(activation):
    layer = FeedForward(8, 16, activation=activation)
    config = layer.get_config()
    restored = FeedForward.from_config(config)
    assert keras.activations.get(restored.get_config()["activation"]) is gelu_tanh
