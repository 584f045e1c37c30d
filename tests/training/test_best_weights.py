import json
import math
import os
import warnings

import keras
import numpy as np
import pytest

from keras_transformer.training import BestWeights


def _model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])


def _run(best, model, values, first_epoch=0):
    """Ends one epoch per value, the model's weights set to the epoch's
    number; returns the epoch whose weights the file holds."""
    best.set_model(model)
    best.on_train_begin()
    for epoch, value in enumerate(values, start=first_epoch):
        model.set_weights([np.full_like(w, epoch + 1) for w in model.get_weights()])
        best.on_epoch_end(epoch, {"val_loss": value, "loss": 0.0})
    return _saved_epoch(best.path)


def _saved_epoch(path):
    if not os.path.exists(path):
        return None
    check = _model()
    check.load_weights(path)
    (value,) = set(np.concatenate([w.ravel() for w in check.get_weights()]).tolist())
    return int(value)


@pytest.mark.parametrize(
    "values, want",
    [
        ([3.0, 2.0, 1.0], 3),
        ([1.0, 2.0, 3.0], 1),
        ([2.0, 1.0, 1.5, 1.0], 2),  # a tie does not replace
        ([float("nan"), 2.0, float("nan")], 2),
        ([5.0, 0.5, 0.7, 0.6], 2),
    ],
)
def test_keeps_the_epoch_with_the_lowest_value(tmp_path, values, want):
    best = BestWeights(str(tmp_path / "best.weights.h5"))
    assert _run(best, _model(), values) == want
    finite = [v for v in values if not math.isnan(v)]
    assert best.best == min(finite)
    assert best.best_epoch == want
    with open(tmp_path / "best.json") as f:
        assert json.load(f) == {"monitor": "val_loss", "value": min(finite), "epoch": want}


@pytest.mark.parametrize("after_restart, want", [([0.9, 0.8], 2), ([0.5, 0.4], 4), ([0.45], 3)])
def test_a_resumed_run_replaces_only_with_a_better_epoch(tmp_path, after_restart, want):
    path = str(tmp_path / "best.weights.h5")
    assert _run(BestWeights(path), _model(), [1.0, 0.7]) == 2
    # A new process: a new callback and model, resuming at epoch 2.
    resumed = BestWeights(path)
    assert _run(resumed, _model(), after_restart, first_epoch=2) == want
    assert resumed.best == min([0.7, *after_restart])


def test_a_record_for_another_monitor_or_without_weights_counts_as_none(tmp_path):
    path = str(tmp_path / "best.weights.h5")
    _run(BestWeights(path), _model(), [0.1])
    other = BestWeights(path, monitor="loss")
    other.set_model(_model())
    other.on_train_begin()
    assert other.best == math.inf
    os.remove(path)
    same = BestWeights(path)
    same.set_model(_model())
    same.on_train_begin()
    assert same.best == math.inf


@pytest.mark.parametrize("record", ["{", '{"monitor": "val_loss"}', '["val_loss"]'])
def test_an_edited_record_starts_afresh(tmp_path, record):
    path = str(tmp_path / "best.weights.h5")
    _run(BestWeights(path), _model(), [0.1])
    (tmp_path / "best.json").write_text(record)
    assert _run(BestWeights(path), _model(), [0.9], first_epoch=1) == 2


def test_a_missing_monitor_warns_once_and_saves_nothing(tmp_path):
    best = BestWeights(str(tmp_path / "best.weights.h5"), monitor="val_bleu_loss")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _run(best, _model(), [1.0, 0.5, 0.2]) is None
    messages = [str(w.message) for w in caught if "val_bleu_loss" in str(w.message)]
    assert len(messages) == 1 and "val_loss" in messages[0]
    assert os.listdir(tmp_path) == []


class _Killed(BaseException):
    pass


def test_a_kill_mid_save_leaves_the_previous_best(tmp_path, monkeypatch):
    path = str(tmp_path / "best.weights.h5")
    best = BestWeights(path)
    model = _model()
    assert _run(best, model, [1.0]) == 1
    real_save = keras.Model.save_weights

    def killed_midway(self, filepath, *args, **kwargs):
        real_save(self, filepath, *args, **kwargs)
        with open(filepath, "r+b") as f:
            f.truncate(1024)
        raise _Killed

    monkeypatch.setattr(keras.Model, "save_weights", killed_midway)
    model.set_weights([np.full_like(w, 2) for w in model.get_weights()])
    with pytest.raises(_Killed):
        best.on_epoch_end(1, {"val_loss": 0.5})
    monkeypatch.undo()
    assert _saved_epoch(path) == 1
    with open(tmp_path / "best.json") as f:
        assert json.load(f)["value"] == 1.0


@pytest.mark.parametrize("path", ["best.h5", "best.keras"])
def test_a_path_keras_cannot_load_is_refused(path):
    with pytest.raises(ValueError, match="weights.h5"):
        BestWeights(path)
