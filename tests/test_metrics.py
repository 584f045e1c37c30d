import keras
import numpy as np
import pytest

from keras_transformer.metrics import MaskedAccuracy
from tests.backends import to_numpy


def test_counts_only_non_pad_tokens_across_batches(rng):
    metric = MaskedAccuracy()
    hits = total = 0
    for _ in range(3):
        y_true = rng.integers(0, 5, (4, 6))
        logits = rng.normal(size=(4, 6, 5)).astype("float32")
        metric.update_state(y_true, logits)
        real = y_true != 0
        hits += ((logits.argmax(-1) == y_true) & real).sum()
        total += real.sum()
    assert float(metric.result()) == pytest.approx(hits / total, rel=1e-6)
    metric.reset_state()
    assert float(metric.result()) == 0.0


def test_keras_mask_is_ignored(rng):
    # Step 0's Keras mask is False (a Masking layer zeroes it: its argmax,
    # 0, is wrong); step 1 is right; step 2 is padding. Only the labels'
    # padding counts: 1 of 2, where honouring the mask would give 1 of 1.
    y_true = np.array([[1, 2, 0]])
    logits = np.eye(5, dtype="float32")[[[1, 2, 0]]]
    logits[0, 0] = -7.0
    inputs = keras.Input(shape=logits.shape[1:])
    masked = keras.Model(inputs, keras.layers.Masking(mask_value=-7.0)(inputs))(logits)
    assert to_numpy(masked._keras_mask).tolist() == [[False, True, True]]
    metric = MaskedAccuracy()
    metric.update_state(y_true, masked)
    assert float(metric.result()) == pytest.approx(0.5)


def test_serializable():
    metric = MaskedAccuracy(pad_id=3, name="acc")
    restored = keras.metrics.deserialize(keras.metrics.serialize(metric))
    assert restored.get_config() == metric.get_config()
    with pytest.raises(ValueError, match="pad_id"):
        MaskedAccuracy(pad_id=None)
