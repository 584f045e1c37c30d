import os

import keras
import numpy as np
import pytest

from keras_transformer.training import EpochWeights
from keras_transformer.training.epoch_weights import epoch_weight_files


def _fit(callback, epochs, initial_epoch=0, model=None):
    keras.utils.set_random_seed(0)
    if model is None:
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
    x = np.random.default_rng(0).normal(size=(16, 2)).astype("float32")
    model.fit(
        x,
        x.sum(axis=1, keepdims=True),
        batch_size=4,
        epochs=epochs,
        initial_epoch=initial_epoch,
        callbacks=[callback],
        verbose=0,
    )
    return model


class RecordWeights(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.by_epoch = {}

    def on_epoch_end(self, epoch, logs=None):
        self.by_epoch[epoch + 1] = [w.copy() for w in self.model.get_weights()]


@pytest.mark.parametrize("epochs, keep", [(1, 3), (3, 3), (5, 2), (4, 1)])
def test_keeps_the_newest_epochs(tmp_path, epochs, keep):
    directory = str(tmp_path / "epochs")
    recorder = RecordWeights()
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(16, 2)).astype("float32")
    model.fit(
        x,
        x.sum(axis=1, keepdims=True),
        batch_size=4,
        epochs=epochs,
        callbacks=[recorder, EpochWeights(directory, keep=keep)],
        verbose=0,
    )

    kept = epoch_weight_files(directory)
    assert [epoch for epoch, _ in kept] == list(range(max(1, epochs - keep + 1), epochs + 1))
    assert sorted(os.listdir(directory)) == [
        os.path.basename(p) for _, p in kept
    ]  # no partial files
    for epoch, path in kept:
        model.load_weights(path)
        for got, want in zip(model.get_weights(), recorder.by_epoch[epoch]):
            np.testing.assert_array_equal(got, want)


def test_a_resumed_run_overwrites_the_epochs_it_repeats(tmp_path):
    directory = str(tmp_path / "epochs")
    model = _fit(EpochWeights(directory, keep=5), epochs=3)
    first = os.path.getmtime(os.path.join(directory, "epoch_0003.weights.h5"))
    os.utime(os.path.join(directory, "epoch_0003.weights.h5"), (first - 100, first - 100))
    _fit(EpochWeights(directory, keep=5), epochs=4, initial_epoch=2, model=model)
    assert [epoch for epoch, _ in epoch_weight_files(directory)] == [1, 2, 3, 4]
    assert os.path.getmtime(os.path.join(directory, "epoch_0003.weights.h5")) > first - 100


def test_listing_ignores_other_files(tmp_path):
    for name in (
        "epoch_0010.weights.h5",
        "epoch_0002.weights.h5",
        "partial.epoch_0003.weights.h5",
        "epoch_x.weights.h5",
        "notes.txt",
        "epoch_0004.weights.h5.tmp",
    ):
        (tmp_path / name).write_bytes(b"")
    assert [epoch for epoch, _ in epoch_weight_files(str(tmp_path))] == [2, 10]
    assert epoch_weight_files(str(tmp_path / "missing")) == []


@pytest.mark.parametrize("keep", [0, -1, 2.0, True, "3", None])
def test_rejects_a_bad_keep(tmp_path, keep):
    with pytest.raises(ValueError, match="keep"):
        EpochWeights(str(tmp_path), keep=keep)


@pytest.mark.parametrize(
    "average_last, is_chief, expected", [(0, True, []), (3, True, [3]), (3, False, [])]
)
def test_run_callbacks_keep_epochs_when_averaging(tmp_path, average_last, is_chief, expected):
    from keras_transformer.training import TrainConfig
    from keras_transformer.training.callbacks import make_callbacks
    from keras_transformer.training.run_directory import RunDirectory

    run = RunDirectory(str(tmp_path))
    config = TrainConfig(output_dir=run.path, average_last=average_last)
    callbacks = make_callbacks(run, config, has_validation=True, is_chief=is_chief)
    keepers = [c for c in callbacks if isinstance(c, EpochWeights)]
    assert [c.keep for c in keepers] == expected
    assert all(c.directory == run.epoch_weights for c in keepers)
