import keras
import numpy as np
import pytest

from keras_transformer.layers import FeedForward
from tests import reference
from tests.backends import assert_allclose, to_numpy


def test_matches_reference(rng):
    layer = FeedForward(6, 10, dropout=0.3)
    x = rng.normal(size=(2, 3, 6)).astype("float32")
    out = layer(x, training=False)
    w1, b1, w2, b2 = layer.get_weights()
    assert_allclose(out, reference.feed_forward(x, w1, b1, w2, b2), atol=1e-5)


def test_dropout_only_in_training(rng):
    layer = FeedForward(6, 64, dropout=0.5)
    x = rng.normal(size=(2, 3, 6)).astype("float32")
    assert_allclose(layer(x), layer(x, training=False))
    assert np.abs(to_numpy(layer(x, training=True)) - to_numpy(layer(x))).max() > 1e-4


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(d_model=0, dff=4), "d_model"),
        (dict(d_model=4, dff=0), "dff"),
        (dict(d_model=4, dff=4, dropout=-0.1), "dropout"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FeedForward(**kwargs)


def test_weights_by_role_name_every_weight_once():
    layer = FeedForward(d_model=8, dff=32)
    with pytest.raises(ValueError, match="before it is built"):
        layer.weights_by_role()
    layer(keras.ops.ones((2, 3, 8)))
    roles = layer.weights_by_role()
    assert sorted(id(v) for v in roles.values()) == sorted(id(v) for v in layer.weights)
    assert tuple(roles["intermediate_kernel"].shape) == (8, 32)
    assert tuple(roles["output_bias"].shape) == (8,)
