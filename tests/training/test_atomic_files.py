import json
import os

import keras
import numpy as np
import pytest

from keras_transformer.training import atomic_files
from keras_transformer.training.atomic_files import save_weights_atomically, write_json_atomically


def _model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])


@pytest.mark.parametrize("name", ["final.weights.h5", "sub/dir/epoch_0001.weights.h5"])
def test_round_trips_and_leaves_only_the_file(tmp_path, name):
    model = _model(0)
    path = tmp_path / name
    assert save_weights_atomically(model, str(path)) == str(path)
    other = _model(1)
    other.load_weights(str(path))
    for a, b in zip(other.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert os.listdir(path.parent) == [path.name]


@pytest.mark.parametrize("name", ["final.h5", "final.keras", "final.weights", "weights.h5.tmp"])
def test_a_name_keras_cannot_load_is_refused(tmp_path, name):
    with pytest.raises(ValueError, match=r"\.weights\.h5.*" + name.replace(".", r"\.")):
        save_weights_atomically(_model(0), str(tmp_path / name))
    assert os.listdir(tmp_path) == []


class _Killed(BaseException):
    pass


def test_a_save_killed_midway_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = str(tmp_path / "best.weights.h5")
    old = _model(0)
    save_weights_atomically(old, path)
    new = _model(1)
    real_save = keras.Model.save_weights

    def killed_midway(self, filepath, *args, **kwargs):
        real_save(self, filepath, *args, **kwargs)
        with open(filepath, "r+b") as f:  # what a kill mid-write leaves
            f.truncate(1024)
        raise _Killed

    monkeypatch.setattr(keras.Model, "save_weights", killed_midway)
    with pytest.raises(_Killed):
        save_weights_atomically(new, path)
    monkeypatch.undo()
    check = _model(2)
    check.load_weights(path)
    for a, b in zip(check.get_weights(), old.get_weights()):
        np.testing.assert_array_equal(a, b)
    # The next save replaces the leftover partial file.
    save_weights_atomically(new, path)
    check.load_weights(path)
    for a, b in zip(check.get_weights(), new.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert os.listdir(tmp_path) == ["best.weights.h5"]


@pytest.mark.parametrize("values", [{"epoch": 2, "weights": "backup_000000002.weights.h5"}, [1.5]])
def test_json_round_trips_and_leaves_only_the_file(tmp_path, values):
    path = tmp_path / "sub" / "training_metadata.json"
    assert write_json_atomically(str(path), values) == str(path)
    assert json.loads(path.read_text()) == values
    assert os.listdir(path.parent) == [path.name]


def test_a_json_write_killed_midway_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = str(tmp_path / "best.json")
    write_json_atomically(path, {"value": 1.0})

    def killed_midway(values, f, **kwargs):
        f.write('{"value": ')
        raise _Killed

    monkeypatch.setattr(atomic_files.json, "dump", killed_midway)
    with pytest.raises(_Killed):
        write_json_atomically(path, {"value": 0.5})
    monkeypatch.undo()
    with open(path) as f:
        assert json.load(f) == {"value": 1.0}
