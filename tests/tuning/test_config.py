import pytest

from keras_transformer.tuning.config import TuneConfig

REQUIRED = {"dataset": "synthetic", "directory": "/tmp/search"}


def test_round_trips_through_a_dict():
    config = TuneConfig(**REQUIRED, space={"d_model": [64, 128]}, max_trials=3)
    assert TuneConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    "values, message",
    [
        ({"tuner": "grid"}, "`tuner` must be one of"),
        ({"objective": "bleu"}, "`objective` must be one of"),
        ({"max_trials": 0}, "`max_trials` must be a positive int"),
        ({"steps_per_epoch": -1}, "`steps_per_epoch` must be a positive int"),
        ({"verbose": 3}, "`verbose` must be 0, 1 or 2"),
        ({"space": {"depth": [1]}}, r"Unknown search dimension 'depth'"),
        ({"space": {"dropout": {"min": 0.3, "max": 0.1}}}, "min < max"),
        ({"space": {"dff": {"min": 64.0, "max": 128}}}, "'dff' takes integers"),
        ({"space": {"dropout": {"min": 0.0, "max": 0.3, "sampling": "log"}}}, "needs min > 0"),
        ({"space": {"dropout": {"min": 0.1, "max": 0.3, "sampling": "exp"}}}, "sampling must"),
        ({"space": {"dropout": {"low": 0.1}}}, "a range is"),
        ({"space": {"norm_first": {"min": 0, "max": 1}}}, "is a boolean"),
        ({"space": {"d_model": None}}, "cannot be None"),
        ({"space": {"num_layers": [1, 2.5]}}, "takes positive integers"),
        ({"space": {"batch_size": [8]}}, "batches by tokens"),
        ({"space": {"batch_tokens": [64, 1024]}}, "at least max_length=128"),
        ({"space": [1]}, "`space` must be a dict"),
    ],
)
def test_bad_values_are_named(values, message):
    with pytest.raises(ValueError, match=message):
        TuneConfig(**{**REQUIRED, **values})


def test_missing_and_unknown_keys_are_named():
    with pytest.raises(ValueError, match=r"Missing tune config keys: \['directory'\]"):
        TuneConfig.from_dict({"dataset": "synthetic"})
    with pytest.raises(ValueError, match=r"Unknown tune config keys: \['trials'\]"):
        TuneConfig.from_dict({**REQUIRED, "trials": 2})


def test_ranges_round_trip_and_are_checked():
    space = {
        "dropout": {"min": 0.0, "max": 0.3, "step": 0.05},
        "warmup_steps": {"min": 100, "max": 4000, "sampling": "log"},
        "attention_dropout": None,
    }
    config = TuneConfig(**REQUIRED, space=space)
    assert TuneConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="at least max_length=128"):
        TuneConfig(**REQUIRED, space={"batch_tokens": {"min": 64, "max": 2048, "step": 64}})
