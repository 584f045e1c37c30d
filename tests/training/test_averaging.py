import json
import os

import keras
import numpy as np
import pytest

from keras_transformer.models import Transformer
from keras_transformer.training import TrainConfig, average_checkpoints, average_weights, load_run
from keras_transformer.training.run_directory import RunDirectory

ARCH = dict(
    num_layers=1, d_model=16, num_heads=2, dff=32, source_vocab_size=20, target_vocab_size=24
)


def _transformer(seed):
    keras.utils.set_random_seed(seed)
    model = Transformer(**ARCH)
    model.build(((None, None), (None, None)))
    return model


def _save_versions(tmp_path, count):
    """`count` weight files of differently initialized Transformers."""
    paths, values = [], []
    for seed in range(count):
        model = _transformer(seed)
        path = str(tmp_path / f"w{seed}.weights.h5")
        model.save_weights(path)
        paths.append(path)
        values.append(model.get_weights())
    return paths, values


@pytest.mark.parametrize("count", [1, 2, 5])
def test_average_is_the_element_wise_mean(tmp_path, count):
    paths, values = _save_versions(tmp_path, count)
    model = average_weights(_transformer(99), paths)
    for i, got in enumerate(model.get_weights()):
        want = np.mean(np.stack([v[i].astype(np.float64) for v in values]), axis=0)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        assert got.dtype == values[0][i].dtype


def test_average_of_copies_is_the_same_model(tmp_path):
    paths, values = _save_versions(tmp_path, 1)
    model = average_weights(_transformer(7), paths * 3)
    source = np.array([[3, 4, 5, 2, 0]])
    target = np.array([[1, 6, 7, 0]])
    reference = _transformer(7)
    reference.set_weights(values[0])
    np.testing.assert_allclose(model((source, target)), reference((source, target)), atol=1e-6)


def test_bad_inputs_are_named(tmp_path):
    paths, _ = _save_versions(tmp_path, 1)
    with pytest.raises(ValueError, match="No weight files"):
        average_weights(_transformer(0), [])
    with pytest.raises(FileNotFoundError, match="missing.weights.h5"):
        average_weights(_transformer(0), [paths[0], str(tmp_path / "missing.weights.h5")])
    other = Transformer(**{**ARCH, "d_model": 32})
    other.build(((None, None), (None, None)))
    with pytest.raises(ValueError, match="w0.weights.h5"):
        average_weights(other, paths)


def _fake_run(tmp_path, epochs):
    """A run directory with a model config and weights kept for `epochs`."""
    run = RunDirectory(str(tmp_path / "run"))
    os.makedirs(run.epoch_weights)
    run.write_json(run.model_config, {**_transformer(0).get_config(), "dtype": None})
    values = {}
    for epoch in epochs:
        model = _transformer(epoch)
        model.save_weights(os.path.join(run.epoch_weights, f"epoch_{epoch:04d}.weights.h5"))
        values[epoch] = model.get_weights()
    _transformer(100).save_weights(run.best_weights)
    return run, values


@pytest.mark.parametrize(
    "kept, last, used",
    [
        ([3, 4, 5, 6], 2, [5, 6]),
        ([1, 2, 3], 3, [1, 2, 3]),
        ([9, 10], 5, [9, 10]),  # fewer kept than asked: all of them
        ([8, 10, 12], 2, [10, 12]),
    ],
)
def test_average_checkpoints_uses_the_newest_epochs(tmp_path, kept, last, used):
    run, values = _fake_run(tmp_path, kept)
    _, epochs = average_checkpoints(run.path, last=last)
    assert epochs == used
    assert json.load(open(run.averaged_info))["epochs"] == used
    model = _transformer(50)
    model.load_weights(run.averaged_weights)
    for i, got in enumerate(model.get_weights()):
        want = np.mean(np.stack([values[e][i] for e in used]), axis=0)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert not [name for name in os.listdir(run.path) if name.startswith("partial")]


def test_average_checkpoints_errors(tmp_path):
    run, _ = _fake_run(tmp_path, [1])
    os.remove(run.model_config)
    with pytest.raises(FileNotFoundError, match="is not a training run"):
        average_checkpoints(run.path, last=1)
    empty = RunDirectory(str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="average_last"):
        average_checkpoints(empty.path, last=2)
    for last in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="last"):
            average_checkpoints(empty.path, last=last)


def test_load_run_picks_the_weights_asked_for(tmp_path, monkeypatch):
    from keras_transformer.training import run_directory

    run, values = _fake_run(tmp_path, [1, 2])
    monkeypatch.setattr(run_directory, "load_tokenizer", lambda path: path)
    run.write_json(run.config, {})
    best = _transformer(100).get_weights()

    def loaded(weights):
        return load_run(run.path, weights=weights)[0].get_weights()[0]

    np.testing.assert_array_equal(loaded("auto"), best[0])  # no average yet
    average_checkpoints(run.path, last=2)
    averaged = (values[1][0] + values[2][0]) / 2
    np.testing.assert_allclose(loaded("auto"), averaged, rtol=1e-6)
    np.testing.assert_allclose(loaded("averaged"), averaged, rtol=1e-6)
    np.testing.assert_array_equal(loaded("best"), best[0])
    with pytest.raises(FileNotFoundError, match="final.weights.h5"):
        loaded("final")
    with pytest.raises(ValueError, match="weights"):
        loaded("newest")


@pytest.mark.parametrize("value", [-1, 1.5, True, "4"])
def test_config_rejects_a_bad_average_last(value):
    with pytest.raises(ValueError, match="average_last"):
        TrainConfig(average_last=value)
