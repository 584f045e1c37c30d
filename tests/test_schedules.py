import keras
import numpy as np
import pytest

from keras_transformer.schedules import WarmupSchedule
from tests.backends import assert_allclose
from tests.reference import inverse_sqrt_learning_rate, paper_learning_rate


@pytest.mark.parametrize("d_model,warmup,scale", [(512, 4000, 1.0), (128, 100, 2.0)])
def test_matches_thepaper_learning_rate(d_model, warmup, scale):
    schedule = WarmupSchedule(d_model, warmup, scale)
    for t in [0, 1, 10, warmup - 2, warmup - 1, warmup, 5 * warmup]:
        assert_allclose(
            float(schedule(t)), paper_learning_rate(t + 1, d_model, warmup, scale), rtol=1e-5
        )


@pytest.mark.parametrize("peak, d_model, warmup", [(0.005, 128, 2000), (7e-4, 512, 4000)])
def test_the_peak_form_is_fairseqsinverse_sqrt_learning_rate(peak, d_model, warmup):
    schedule = WarmupSchedule.from_peak(peak, d_model, warmup)
    assert schedule.peak_learning_rate == pytest.approx(peak)
    for t in [0, 1, warmup // 2, warmup - 1, warmup, 4 * warmup - 1]:
        assert_allclose(
            float(schedule(t)), inverse_sqrt_learning_rate(t + 1, peak, warmup), rtol=1e-5
        )
    # Its config is the scale form's: it loads in any version.
    clone = WarmupSchedule.from_config(schedule.get_config())
    assert set(schedule.get_config()) == {"d_model", "warmup_steps", "scale"}
    assert float(clone(warmup - 1)) == pytest.approx(peak, rel=1e-5)


def test_first_step_is_not_zero_and_peak_at_warmup():
    schedule = WarmupSchedule(512, 10)
    rates = [float(schedule(t)) for t in range(30)]
    assert rates[0] > 0
    assert int(np.argmax(rates)) == 9


def test_drives_an_optimizer_and_serializes():
    schedule = WarmupSchedule(64, 50, scale=0.5)
    optimizer = keras.optimizers.Adam(schedule)
    config = keras.optimizers.serialize(optimizer)
    restored = keras.optimizers.deserialize(config)
    assert isinstance(restored.learning_rate, WarmupSchedule) or isinstance(
        restored._learning_rate, WarmupSchedule
    )
    clone = WarmupSchedule.from_config(schedule.get_config())
    assert float(clone(7)) == pytest.approx(float(schedule(7)))
    restored_schedule = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(schedule)
    )
    assert restored_schedule.get_config() == schedule.get_config()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(d_model=0), "d_model"),
        (dict(d_model=8, warmup_steps=0), "warmup_steps"),
        (dict(d_model=8, scale=0.0), "scale"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        WarmupSchedule(**kwargs)


@pytest.mark.parametrize("peak", [0.0, -1e-3, True])
def test_invalid_peak(peak):
    with pytest.raises(ValueError, match="peak_learning_rate"):
        WarmupSchedule.from_peak(peak, 128, 100)
