import json
import os

import keras
import numpy as np
import pytest

from keras_transformer.models import Transformer
from keras_transformer.training import Backup
from keras_transformer.training import backup as backup_module
from keras_transformer.training.recipe import compile_for_training

STEPS = 8  # batches per epoch: 32 rows in batches of 4


def _model(seed=0, steps_per_execution=1):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse", steps_per_execution=steps_per_execution)
    model.optimizer.build(model.trainable_variables)
    return model


def _data():
    x = np.random.default_rng(1).normal(size=(4 * STEPS, 3)).astype("float32")
    return x, x.sum(axis=1, keepdims=True)


class _Snapshots(keras.callbacks.Callback):
    """What a backup must restore: the state at each of its saves."""

    def __init__(self, backup):
        super().__init__()
        self.backup = backup
        self.states = []
        self.at_begin = None
        save = backup.save

        def recorded(epoch, batch):
            save(epoch, batch)
            self.states.append((epoch, batch, _state(self.model)))

        backup.save = recorded

    def on_train_begin(self, logs=None):
        self.at_begin = _state(self.model)


def _state(model):
    return {
        "weights": [w.copy() for w in model.get_weights()],
        "optimizer": [np.array(v) for v in model.optimizer.variables],
    }


def _assert_same_state(got, want):
    for key in ("weights", "optimizer"):
        assert len(got[key]) == len(want[key])
        for a, b in zip(got[key], want[key]):
            np.testing.assert_array_equal(a, b)


def _fit(model, backup, epochs, record=None):
    x, y = _data()
    seen = []
    on_epoch = keras.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: seen.append(e))
    callbacks = [backup, on_epoch] + ([record] if record else [])
    model.fit(x, y, batch_size=4, epochs=epochs, verbose=0, shuffle=False, callbacks=callbacks)
    return seen


@pytest.mark.parametrize("save_freq", [1, 3, 5, 100])
def test_resume_restores_weights_optimizer_and_epoch(tmp_path, save_freq):
    first = _model(seed=0)
    _fit(first, Backup(str(tmp_path), save_freq), epochs=2)
    resumed = _model(seed=1)
    record = _Snapshots(Backup(str(tmp_path), save_freq))
    seen = _fit(resumed, record.backup, epochs=3, record=record)
    assert seen == [2]
    want = _model(seed=0)
    _fit(want, Backup(str(tmp_path / "other"), save_freq), epochs=2)
    _assert_same_state(record.at_begin, _state(want))
    assert record.backup.restored["epoch"] == 2


@pytest.mark.parametrize(
    "save_freq, steps_per_execution, expected",
    [
        (3, 1, [(0, 3), (0, 6), (1, 0), (1, 3), (1, 6), (2, 0)]),
        (4, 1, [(0, 4), (0, 8), (1, 4), (1, 8)]),
        (8, 1, [(0, 8), (1, 8)]),
        (3, 2, [(0, 4), (0, 8), (1, 4), (1, 8)]),
        (100, 1, [(1, 0), (2, 0)]),
    ],
)
def test_saves_every_save_freq_steps_and_at_each_epoch_end(
    tmp_path, save_freq, steps_per_execution, expected
):
    model = _model(steps_per_execution=steps_per_execution)
    record = _Snapshots(Backup(str(tmp_path), save_freq))
    _fit(model, record.backup, epochs=2, record=record)
    assert [(epoch, batch) for epoch, batch, _ in record.states] == expected
    # At an epoch's end the epoch is committed, with the weights of a save
    # at its last step rather than a second copy of them.
    metadata = json.load(open(tmp_path / "training_metadata.json"))
    assert (metadata["epoch"], metadata["batch"]) == (2, 0)
    assert sorted(os.listdir(tmp_path)) == [metadata["weights"], "training_metadata.json"]


class _Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs."""


def _kill_mid_weights(monkeypatch, backup, model):
    save = model.save_weights

    def half_written(path, overwrite=True):
        save(path, overwrite=overwrite)
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 3)
        raise _Killed

    monkeypatch.setattr(model, "save_weights", half_written)


def _kill_before_commit(monkeypatch, backup, model):
    replace = os.replace

    def killed(src, dst):
        if os.path.basename(dst) == backup_module.METADATA:
            raise _Killed
        replace(src, dst)

    monkeypatch.setattr(backup_module.os, "replace", killed)


def _kill_mid_metadata(monkeypatch, backup, model):
    def half_written(value, f, **kwargs):
        f.write(json.dumps(value)[:7])
        raise _Killed

    monkeypatch.setattr(backup_module.json, "dump", half_written)


@pytest.mark.parametrize("kill", [_kill_mid_weights, _kill_before_commit, _kill_mid_metadata])
def test_a_kill_mid_save_resumes_from_the_last_whole_backup(tmp_path, monkeypatch, kill):
    model = _model()
    record = _Snapshots(Backup(str(tmp_path), save_freq=3))
    _fit(model, record.backup, epochs=1, record=record)  # last save: end of epoch 1
    epoch, batch, committed = record.states[-1]
    with monkeypatch.context() as patch:
        kill(patch, record.backup, model)
        with pytest.raises(_Killed):  # the first save of epoch 2, after 3 steps
            _fit(model, record.backup, epochs=2)
    assert any(name.startswith("partial.") for name in os.listdir(tmp_path)) or (
        kill is _kill_before_commit
    )
    resumed = _model(seed=5)
    backup = Backup(str(tmp_path), save_freq=3)
    record = _Snapshots(backup)
    seen = _fit(resumed, backup, epochs=2, record=record)
    assert seen == [epoch] == [1]
    _assert_same_state(record.at_begin, committed)
    # The next save clears what the killed one left.
    names = sorted(os.listdir(tmp_path))
    assert len(names) == 2 and names[1] == backup_module.METADATA, names


def test_a_transformer_resumes_exactly(tmp_path):
    def transformer():
        keras.utils.set_random_seed(3)
        model = Transformer(1, 16, 2, 32, source_vocab_size=30, target_vocab_size=30, dropout=0.0)
        model.build(((None, None), (None, None)))
        compile_for_training(model, warmup_steps=4)
        return model

    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 30, (16, 5)), rng.integers(1, 30, (16, 4))

    def fit(model, epochs, directory, initial_epoch=0):
        model.fit(
            (src, tgt), tgt, batch_size=4, epochs=epochs, shuffle=False, verbose=0,
            callbacks=[Backup(str(directory), save_freq=3)],
        )  # fmt: skip
        return model

    straight = fit(transformer(), 3, tmp_path / "a")
    fit(transformer(), 2, tmp_path / "b")
    resumed = fit(transformer(), 3, tmp_path / "b")
    assert int(resumed.optimizer.iterations.numpy()) == 12
    for a, b in zip(straight.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _corrupt_weights(directory):
    name = json.load(open(os.path.join(directory, backup_module.METADATA)))["weights"]
    path = os.path.join(directory, name)
    with open(path, "r+b") as f:
        f.truncate(1000)
    return name


def _corrupt_metadata(directory):
    with open(os.path.join(directory, backup_module.METADATA), "w") as f:
        f.write('{"epoch": ')
    return backup_module.METADATA


def _wrong_epoch(directory):
    with open(os.path.join(directory, backup_module.METADATA), "w") as f:
        json.dump({"epoch": "two", "weights": "backup_000000001.weights.h5"}, f)
    return backup_module.METADATA


def _weights_of_another_model(directory):
    other = keras.Sequential([keras.Input((5,)), keras.layers.Dense(2)])
    name = json.load(open(os.path.join(directory, backup_module.METADATA)))["weights"]
    other.save_weights(os.path.join(directory, name), overwrite=True)
    return name


# Keras warns about the other model's optimizer before it refuses its layers.
@pytest.mark.filterwarnings("ignore:Skipping variable loading for optimizer:UserWarning")
@pytest.mark.parametrize(
    "damage", [_corrupt_weights, _corrupt_metadata, _wrong_epoch, _weights_of_another_model]
)
def test_a_damaged_backup_is_named_not_silently_dropped(tmp_path, damage):
    _fit(_model(), Backup(str(tmp_path), save_freq=3), epochs=1)
    name = damage(str(tmp_path))
    with pytest.raises(ValueError, match="delete .* to start the run over") as error:
        _fit(_model(), Backup(str(tmp_path), save_freq=3), epochs=2)
    assert name in str(error.value)


class _KerasSnapshots(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.by_epoch = {}

    def on_epoch_end(self, epoch, logs=None):
        self.by_epoch[epoch + 1] = _state(self.model)


@pytest.mark.parametrize("truncate_latest", [False, True])
def test_resumes_a_backup_written_by_backup_and_restore(tmp_path, truncate_latest):
    model = _model()
    snapshots = _KerasSnapshots()
    keras_backup = keras.callbacks.BackupAndRestore(
        str(tmp_path), save_freq="epoch", delete_checkpoint=False, double_checkpoint=True
    )
    x, y = _data()
    model.fit(x, y, batch_size=4, epochs=3, verbose=0, callbacks=[snapshots, keras_backup])
    if truncate_latest:  # killed mid-save: Keras writes in place
        with open(tmp_path / "latest.weights.h5", "r+b") as f:
            f.truncate(2048)
    want = 2 if truncate_latest else 3
    backup = Backup(str(tmp_path), save_freq=100)
    record = _Snapshots(backup)
    seen = _fit(_model(seed=4), backup, epochs=4, record=record)
    assert seen == list(range(want, 4))
    _assert_same_state(record.at_begin, snapshots.by_epoch[want])
    assert not {"latest.weights.h5", "latest.weights.h5.bkp"} & set(os.listdir(tmp_path))


def test_remove_deletes_the_backup(tmp_path):
    backup = Backup(str(tmp_path / "backup"), save_freq=2)
    _fit(_model(), backup, epochs=1)
    assert os.path.isdir(tmp_path / "backup")
    backup.remove()
    assert not os.path.exists(tmp_path / "backup")
    backup.remove()  # nothing there: no error


@pytest.mark.parametrize("save_freq", [0, -1, 2.5, "3", None, True])
def test_rejects_a_bad_save_freq(tmp_path, save_freq):
    with pytest.raises(ValueError, match="save_freq"):
        Backup(str(tmp_path), save_freq=save_freq)


def test_an_unbuilt_model_is_named(tmp_path):
    _fit(_model(), Backup(str(tmp_path), save_freq=3), epochs=1)
    backup = Backup(str(tmp_path), save_freq=3)
    backup.set_model(keras.Sequential([keras.layers.Dense(1)]))
    with pytest.raises(ValueError, match="built model"):
        backup.on_train_begin()
