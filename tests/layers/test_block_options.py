"""layer_norm_epsilon, kernel_initializer and bias_initializer reach every
sublayer of the feed-forward network, the blocks, the stacks and the model,
and survive serialization."""

import keras
import numpy as np
import pytest

from keras_transformer.layers import Decoder, DecoderBlock, Encoder, EncoderBlock, FeedForward
from keras_transformer.models import Transformer
from tests.backends import assert_allclose

OPTIONS = dict(kernel_initializer="ones", bias_initializer=keras.initializers.Constant(0.5))
BLOCK = dict(d_model=8, num_heads=2, dff=16)


def _build(layer):
    if isinstance(layer, Transformer):
        layer.build(((None, None), (None, None)))
    elif isinstance(layer, (DecoderBlock, Decoder)):
        layer.build((None, None, 8), (None, None, 8))
    else:
        layer.build((None, None, 8))
    return layer


CASES = {
    "FeedForward": lambda **o: FeedForward(8, 16, **o),
    "EncoderBlock": lambda **o: EncoderBlock(**BLOCK, layer_norm_epsilon=1e-3, **o),
    "DecoderBlock": lambda **o: DecoderBlock(**BLOCK, layer_norm_epsilon=1e-3, **o),
    "Encoder": lambda **o: Encoder(2, **BLOCK, norm_first=True, layer_norm_epsilon=1e-3, **o),
    "Decoder": lambda **o: Decoder(2, **BLOCK, norm_first=True, layer_norm_epsilon=1e-3, **o),
    "Transformer": lambda **o: Transformer(2, 8, 2, 16, 20, 20, layer_norm_epsilon=1e-3, **o),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_options_reach_every_sublayer(name):
    layer = _build(CASES[name](**OPTIONS))
    kernels = [w for w in layer.weights if w.path.endswith("kernel")]
    biases = [w for w in layer.weights if w.path.endswith("bias") and "norm" not in w.path]
    norms = [s for s in layer._flatten_layers() if isinstance(s, keras.layers.LayerNormalization)]
    if name == "Transformer":  # the output projection keeps Keras' defaults
        kernels = [w for w in kernels if "output_projection" not in w.path]
        biases = [w for w in biases if "output_projection" not in w.path]
    assert kernels and biases
    assert all(np.all(keras.ops.convert_to_numpy(w) == 1.0) for w in kernels)
    assert all(np.all(keras.ops.convert_to_numpy(w) == 0.5) for w in biases)
    if name != "FeedForward":
        assert norms and all(n.epsilon == 1e-3 for n in norms)


@pytest.mark.parametrize("name", sorted(CASES))
def test_options_round_trip_through_the_config(name):
    layer = CASES[name](**OPTIONS)
    config = layer.get_config()
    again = type(layer).from_config(config)
    assert again.get_config() == config
    assert config["kernel_initializer"]["class_name"] == "Ones"
    if name != "FeedForward":
        assert config["layer_norm_epsilon"] == 1e-3


def test_defaults_are_the_previous_behaviour():
    block = EncoderBlock(**BLOCK)
    assert block.layer_norm_epsilon == 1e-6
    config = block.get_config()
    assert config["kernel_initializer"]["class_name"] == "GlorotUniform"
    assert config["bias_initializer"]["class_name"] == "Zeros"
    # A config saved before these options existed still loads.
    old = {
        k: v
        for k, v in config.items()
        if k not in ("layer_norm_epsilon", "kernel_initializer", "bias_initializer")
    }
    assert EncoderBlock.from_config(old).layer_norm_epsilon == 1e-6


def test_a_bad_epsilon_is_named():
    with pytest.raises(ValueError, match="layer_norm_epsilon"):
        EncoderBlock(**BLOCK, layer_norm_epsilon=0.0)


ATTENTION_CASES = {name: make for name, make in CASES.items() if name != "FeedForward"}


def _rates(layer):
    """(residual dropout rates, attention-weight dropout rates) of every sublayer."""
    from keras_transformer.layers import MultiHeadAttention

    sublayers = list(layer._flatten_layers())
    attention = [s.dropout for s in sublayers if isinstance(s, MultiHeadAttention)]
    residual = [
        s.rate
        for s in sublayers
        if isinstance(s, keras.layers.Dropout) and s.name != "attention_dropout"
    ]
    return residual, attention


@pytest.mark.parametrize("name", sorted(ATTENTION_CASES))
@pytest.mark.parametrize("attention_dropout", [None, 0.0, 0.25])
def test_attention_dropout_reaches_every_attention_and_only_those(name, attention_dropout):
    layer = _build(ATTENTION_CASES[name](dropout=0.3, attention_dropout=attention_dropout))
    residual, attention = _rates(layer)
    expected = 0.3 if attention_dropout is None else attention_dropout
    assert attention and all(rate == expected for rate in attention)
    assert residual and all(rate == 0.3 for rate in residual)
    again = type(layer).from_config(layer.get_config())
    assert _rates(_build(again)) == (residual, attention)


@pytest.mark.parametrize("name", sorted(ATTENTION_CASES))
def test_configs_without_attention_dropout_keep_dropping_attention(name):
    # Configs saved before the option existed meant one rate everywhere.
    config = ATTENTION_CASES[name](dropout=0.2).get_config()
    del config["attention_dropout"]
    _, attention = _rates(_build(type(ATTENTION_CASES[name]()).from_config(config)))
    assert attention and all(rate == 0.2 for rate in attention)


def test_attention_dropout_drops_attention_weights_alone():
    x = keras.random.normal((2, 6, 8), seed=1)
    only_attention = EncoderBlock(**BLOCK, dropout=0.0, attention_dropout=0.5)
    without = EncoderBlock(**BLOCK, dropout=0.0, attention_dropout=0.0)
    _build(only_attention), _build(without)
    without.set_weights(only_attention.get_weights())
    inference = keras.ops.convert_to_numpy(only_attention(x, training=False))
    assert_allclose(keras.ops.convert_to_numpy(without(x, training=True)), inference)
    assert not np.allclose(keras.ops.convert_to_numpy(only_attention(x, training=True)), inference)


@pytest.mark.parametrize("rate", [-0.1, 1.0])
def test_attention_dropout_out_of_range_is_named(rate):
    with pytest.raises(ValueError, match="attention_dropout"):
        EncoderBlock(**BLOCK, attention_dropout=rate)


WEIGHT_OPTIONS = dict(
    kernel_regularizer=keras.regularizers.L2(0.01),
    bias_regularizer="l1",
    kernel_constraint="non_neg",
    bias_constraint=keras.constraints.MaxNorm(2.0),
)


def _sublayer_variables(layer):
    """The kernels and biases of the projections and dense layers, the
    output projection of the model aside (it keeps Keras's defaults)."""
    found = [w for w in layer.weights if w.path.endswith(("kernel", "bias"))
             and "norm" not in w.path and "output_projection" not in w.path]  # fmt: skip
    assert found
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_regularizers_and_constraints_reach_every_kernel_and_bias(name):
    layer = _build(CASES[name](**WEIGHT_OPTIONS))
    variables = _sublayer_variables(layer)
    kernels = [w for w in variables if w.path.endswith("kernel")]
    assert all(isinstance(w.constraint, keras.constraints.NonNeg) for w in kernels)
    assert all(isinstance(w.constraint, keras.constraints.MaxNorm)
               for w in variables if w.path.endswith("bias"))  # fmt: skip
    if name == "Transformer":
        layer((np.ones((1, 3)), np.ones((1, 2))))
    elif isinstance(layer, (DecoderBlock, Decoder)):
        layer(np.ones((1, 3, 8), "float32"), np.ones((1, 2, 8), "float32"))
    else:
        layer(np.ones((1, 3, 8), "float32"))
    # One penalty a kernel (L2) and a bias (L1), equal to the formulas'.
    assert len(layer.losses) == len(variables)
    expected = sum(0.01 * np.sum(np.square(keras.ops.convert_to_numpy(w))) for w in kernels)
    expected += sum(0.01 * np.sum(np.abs(keras.ops.convert_to_numpy(w)))
                    for w in variables if w.path.endswith("bias"))  # fmt: skip
    total = sum(float(keras.ops.convert_to_numpy(loss)) for loss in layer.losses)
    assert np.isclose(total, expected, rtol=1e-4)


@pytest.mark.parametrize("name", sorted(CASES))
def test_weight_options_and_the_seed_round_trip(name):
    layer = CASES[name](**WEIGHT_OPTIONS, seed=7)
    config = layer.get_config()
    assert type(layer).from_config(config).get_config() == config
    assert config["seed"] == 7 and config["kernel_constraint"]["class_name"] == "NonNeg"


def _dropped(name, seed):
    keras.utils.set_random_seed(0)  # the same weights each time
    layer = _build(CASES[name](dropout=0.5, seed=seed))
    if name == "Transformer":
        out = layer((np.ones((2, 5)), np.ones((2, 4))), training=True)
    elif isinstance(layer, (DecoderBlock, Decoder)):
        x = np.random.default_rng(0).normal(size=(2, 4, 8)).astype("float32")
        out = layer(x, x, training=True)
    elif name == "FeedForward":
        out = layer(np.ones((2, 4, 8), "float32"), training=True)
    else:
        out = layer(np.random.default_rng(0).normal(size=(2, 4, 8)).astype("float32"),
                    training=True)  # fmt: skip
    return keras.ops.convert_to_numpy(out)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_seed_makes_dropout_repeat(name):
    first, again = _dropped(name, 3), _dropped(name, 3)
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, _dropped(name, 4))


@pytest.mark.parametrize("seed", [1.5, "3", True])
def test_a_bad_seed_is_named(seed):
    with pytest.raises(ValueError, match="`seed` must be an int or None"):
        EncoderBlock(**BLOCK, seed=seed)
