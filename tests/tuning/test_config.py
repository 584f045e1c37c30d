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
        ({"space": {"depth": [1]}}, r"Unknown search dimensions \['depth'\]"),
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


def test_the_0_1_0_dropout_dimension_still_works():
    with pytest.warns(DeprecationWarning, match="dropout_rate"):
        config = TuneConfig(**REQUIRED, space={"dropout_rate": [0.1, 0.2], "dff": [64]})
    assert config.space == {"dropout": [0.1, 0.2], "dff": [64]}
    assert TuneConfig.from_dict(config.to_dict()) == config


def test_the_old_and_new_dropout_dimension_with_different_values_are_refused():
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="`dropout` was given"):
        TuneConfig(**REQUIRED, space={"dropout_rate": [0.1], "dropout": [0.2]})
    with pytest.warns(DeprecationWarning):  # the same value under both names agrees
        config = TuneConfig(**REQUIRED, space={"dropout_rate": [0.1], "dropout": [0.1]})
    assert config.space == {"dropout": [0.1]}
