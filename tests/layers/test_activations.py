import keras
import numpy as np
import pytest

from keras_transformer.layers import FeedForward, gelu_sigmoid, gelu_tanh
from tests.backends import assert_allclose

# The formulas in NumPy, float64 (Hendrycks and Gimpel, 2016).
REFERENCES = {
    gelu_tanh: lambda x: 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3))),
    gelu_sigmoid: lambda x: x / (1.0 + np.exp(-1.702 * x)),
}
NAMES = {gelu_tanh: "keras_transformer>gelu_tanh", gelu_sigmoid: "keras_transformer>gelu_sigmoid"}


@pytest.mark.parametrize("function", [gelu_tanh, gelu_sigmoid], ids=["tanh", "sigmoid"])
@pytest.mark.parametrize("scale", [0.5, 3.0, 30.0])
def test_each_approximation_is_its_formula(rng, scale, function):
    x = (rng.normal(size=(4, 7)) * scale).astype("float32")
    reference = REFERENCES[function](x.astype("f8"))
    assert_allclose(function(keras.ops.convert_to_tensor(x)), reference, atol=1e-5, rtol=1e-5)
    # Not the exact GELU: the tanh form differs by up to about 5e-4 near
    # |x| = 2, the sigmoid form by up to about 2e-2.
    exact = keras.activations.gelu(keras.ops.convert_to_tensor(x), approximate=False)
    if scale == 3.0:
        assert np.abs(np.asarray(keras.ops.convert_to_numpy(exact)) - reference).max() > 1e-5


@pytest.mark.parametrize("function", [gelu_tanh, gelu_sigmoid], ids=["tanh", "sigmoid"])
@pytest.mark.parametrize("by_name", [True, False])
def test_a_layer_saves_it_by_name(function, by_name):
    layer = FeedForward(8, 16, activation=NAMES[function] if by_name else function)
    config = layer.get_config()
    restored = FeedForward.from_config(config)
    assert keras.activations.get(restored.get_config()["activation"]) is function
