import keras
import numpy as np
import pytest

from keras_transformer.training import TimeLimit, TrainConfig
from keras_transformer.training.callbacks import make_callbacks
from keras_transformer.training.run_directory import RunDirectory


class StepClock:
    """A clock that advances one second each time it is read."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        value = self.now
        self.now += 1.0
        return value


def _fit(callback, epochs=3):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.random.default_rng(0).normal(size=(32, 2)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    # 8 steps an epoch.
    history = model.fit(
        x, y, batch_size=4, epochs=epochs, validation_data=(x, y), callbacks=[callback], verbose=0
    )
    return model, history


@pytest.mark.parametrize("seconds, steps, epochs_seen", [(3, 3, 1), (8, 8, 1), (11, 11, 2)])
def test_stops_at_the_first_step_past_the_budget(seconds, steps, epochs_seen):
    # The clock reads 0 at the start and k after step k.
    limit = TimeLimit(minutes=seconds / 60, clock=StepClock())
    model, history = _fit(limit)
    assert int(model.optimizer.iterations.numpy()) == steps
    assert limit.stopped_at_step == steps
    # The cut epoch still ends normally: validated and in the history.
    assert len(history.history["val_loss"]) == epochs_seen


def test_a_budget_not_reached_changes_nothing():
    limit = TimeLimit(minutes=10, clock=StepClock())
    model, history = _fit(limit)
    assert int(model.optimizer.iterations.numpy()) == 24
    assert limit.stopped_at_step is None
    assert len(history.history["loss"]) == 3


@pytest.mark.parametrize("minutes", [0, -1.5, "5", True, None])
def test_rejects_a_budget_that_is_not_a_positive_number(minutes):
    with pytest.raises(ValueError, match="minutes"):
        TimeLimit(minutes=minutes)


@pytest.mark.parametrize("minutes", [0, -2, "ten"])
def test_config_rejects_a_bad_time_limit(minutes):
    with pytest.raises(ValueError, match="time_limit_minutes"):
        TrainConfig(time_limit_minutes=minutes)


def test_config_refuses_a_time_limit_across_workers():
    with pytest.raises(ValueError, match="multi_worker"):
        TrainConfig(time_limit_minutes=30, strategy="multi_worker")


@pytest.mark.parametrize("minutes", [None, 2.5])
def test_run_callbacks_carry_the_configured_limit(tmp_path, minutes):
    config = TrainConfig(output_dir=str(tmp_path), time_limit_minutes=minutes)
    callbacks = make_callbacks(RunDirectory(str(tmp_path)), config, has_validation=False)
    limits = [c for c in callbacks if isinstance(c, TimeLimit)]
    assert [c.minutes for c in limits] == ([] if minutes is None else [minutes])
