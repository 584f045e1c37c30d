import keras
import numpy as np
import pytest

from keras_transformer.losses import MaskedSparseCategoricalCrossentropy
from tests.backends import assert_allclose, to_numpy


def _reference(y_true, logits, eps, pad_id=0):
    vocab = logits.shape[-1]
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    total, count = 0.0, 0
    for b in range(y_true.shape[0]):
        for t in range(y_true.shape[1]):
            if y_true[b, t] == pad_id:
                continue
            q = np.full(vocab, eps / vocab)
            q[y_true[b, t]] += 1 - eps
            total += -(q * logp[b, t]).sum()
            count += 1
    return total / count


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("pad_id", [0, 3])
def test_matches_reference(rng, eps, pad_id):
    y_true = rng.integers(0, 7, (4, 5))
    y_true[0, 2:] = pad_id
    logits = rng.normal(size=(4, 5, 7)).astype("float32") * 3
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=eps, pad_id=pad_id)
    assert_allclose(float(loss(y_true, logits)), _reference(y_true, logits, eps, pad_id), rtol=1e-5)


def test_probabilities_input(rng):
    y_true = rng.integers(1, 7, (2, 3))
    logits = rng.normal(size=(2, 3, 7)).astype("float32")
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    probs = exp / exp.sum(-1, keepdims=True)
    a = MaskedSparseCategoricalCrossentropy()(y_true, logits)
    b = MaskedSparseCategoricalCrossentropy(from_logits=False)(y_true, probs)
    assert_allclose(float(a), float(b), rtol=1e-4)


def _with_keras_mask(values, masked_value):
    """`values` carrying a Keras mask (False where a step is all
    `masked_value`), on every backend, as a Masking layer gives it."""
    inputs = keras.Input(shape=values.shape[1:])
    return keras.Model(inputs, keras.layers.Masking(mask_value=masked_value)(inputs))(values)


def test_keras_mask_on_logits_is_ignored(rng):
    # The loss masks by the labels' padding only: a Keras mask on the
    # logits (here False at steps whose labels are real) changes nothing.
    y_true = rng.integers(1, 7, (2, 4))
    y_true[1, 2:] = 0
    logits = rng.normal(size=(2, 4, 7)).astype("float32")
    logits[0, 1:] = 12345.0
    masked = _with_keras_mask(logits, 12345.0)
    assert not to_numpy(masked._keras_mask)[0, 1:].any()
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)
    expected = float(loss(y_true, to_numpy(masked)))  # the same values, no mask
    assert float(loss(y_true, masked)) == pytest.approx(expected, rel=1e-6)


def test_sample_weight(rng):
    y_true = rng.integers(1, 7, (2, 3))
    logits = rng.normal(size=(2, 3, 7)).astype("float32")
    loss = MaskedSparseCategoricalCrossentropy()
    only_first = float(loss(y_true, logits, sample_weight=np.array([1.0, 0.0])))
    assert only_first == pytest.approx(float(loss(y_true[:1], logits[:1])), rel=1e-5)


def test_serializable_and_invalid_arguments():
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1, pad_id=2)
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert restored.get_config() == loss.get_config()
    with pytest.raises(ValueError, match="label_smoothing"):
        MaskedSparseCategoricalCrossentropy(label_smoothing=1.0)
    with pytest.raises(ValueError, match="pad_id"):
        MaskedSparseCategoricalCrossentropy(pad_id="x")


def test_config_keeps_the_base_config_and_round_trips():
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.2, pad_id=3, name="xent")
    config = loss.get_config()
    assert config["name"] == "xent" and "reduction" in config and config["pad_id"] == 3
    again = MaskedSparseCategoricalCrossentropy.from_config(config)
    assert again.get_config() == config
    # A config saved before the base config was kept still loads.
    old = {"name": "xent", "from_logits": True, "label_smoothing": 0.2, "pad_id": 3}
    assert MaskedSparseCategoricalCrossentropy.from_config(old).label_smoothing == 0.2
