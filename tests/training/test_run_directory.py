import os

import numpy as np
import pytest

from keras_transformer.training.run_directory import RunDirectory, build_run_model, load_run


def test_paths_follow_the_documented_layout(tmp_path):
    run = RunDirectory(str(tmp_path / "run"))
    assert run.path == str(tmp_path / "run")
    assert run.source_tokenizer == str(tmp_path / "run" / "tokenizers" / "source.model")
    assert run.best_weights.endswith("best.weights.h5") and run.epoch_weights.endswith("epochs")
    for path in (
        run.config,
        run.model_config,
        run.final_weights,
        run.averaged_weights,
        run.history,
        run.logs,
        run.backup,
        run.data_stats,
    ):
        assert os.path.dirname(path) == run.path
    assert not run.has_tokenizers()


def test_json_is_written_whole(tmp_path):
    run = RunDirectory(str(tmp_path / "run"))
    run.write_json(run.config, {"b": 1, "a": [1, 2]})
    run.write_json(run.config, {"epochs": 2})
    assert run.read_json(run.config) == {"epochs": 2}
    assert os.listdir(run.path) == ["config.json"]  # no temporary file left


def test_not_a_run_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a training run"):
        build_run_model(RunDirectory(str(tmp_path)))
    with pytest.raises(ValueError, match="weights='latest'"):
        load_run(str(tmp_path), weights="latest")


def test_load_run_restores_the_trained_weights(trained_run):
    model, source, target, config = load_run(trained_run["run"], weights="final")
    run = RunDirectory(trained_run["run"])
    fresh = build_run_model(run)
    assert config["epochs"] == 2 and run.has_tokenizers()
    assert source.vocab_size > 0 and target.vocab_size > 0
    assert any(not np.allclose(a, b) for a, b in zip(model.get_weights(), fresh.get_weights()))
    fresh.load_weights(run.final_weights)
    for a, b in zip(model.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(FileNotFoundError, match="No weights"):
        load_run(trained_run["run"], weights="averaged")  # trained without average_last
