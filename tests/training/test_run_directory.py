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


def _run_of(tmp_path, settings, *, tokenizers=True, backup=False, finished=False):
    """A run directory as `train` leaves it, without training: its config,
    and as asked, tokenizers, a backup (a run killed mid-way) and final
    weights."""
    run = RunDirectory(str(tmp_path / "run"))
    run.write_json(run.config, settings)
    if tokenizers:
        os.makedirs(os.path.dirname(run.source_tokenizer))
        for path in (run.source_tokenizer, run.target_tokenizer):
            open(path, "w").close()
    if backup:
        os.makedirs(run.backup)
        open(os.path.join(run.backup, "training_metadata.json"), "w").close()
    if finished:
        open(run.final_weights, "w").close()
    return run


SETTINGS = dict(vocab_size=300, joint_vocabulary=False, tokenizer_sample=1000, preset="tiny",
                model_overrides={"d_model": 64}, max_length=64, init_from=None,
                epochs=2)  # fmt: skip


@pytest.mark.parametrize(
    "held, changes, refused",
    [
        # Nothing to lose: a new folder, or a run stopped before training.
        ({"tokenizers": False}, {"vocab_size": 100, "preset": "small"}, None),
        ({}, {"preset": "small", "epochs": 9}, None),  # the model is built anew
        ({}, {"vocab_size": 100},
         "the tokenizers of a run of other settings (vocab_size 300, not 100)"),
        ({}, {"joint_vocabulary": True}, "joint_vocabulary False, not True"),
        # A killed run resumes with its settings, more epochs allowed.
        ({"backup": True}, {"epochs": 9}, None),
        ({"backup": True}, {"preset": "small"},
         "the backup of a run of other settings (preset 'tiny', not 'small')"),
        ({"backup": True}, {"model_overrides": {"d_model": 32}},
         "model_overrides {'d_model': 64}, not {'d_model': 32}"),
        # A finished run is never trained into again, with any settings.
        ({"finished": True}, {}, "holds a finished run (final.weights.h5)"),
        ({"finished": True}, {"epochs": 9}, "--init-from"),
        # Killed between its final weights and removing its backup: resumes.
        ({"finished": True, "backup": True}, {}, None),
    ],
)  # fmt: skip
def test_a_run_directory_is_trained_into_again_only_to_resume_it(tmp_path, held, changes, refused):
    from keras_transformer.training.run_directory import check_run_reuse

    run = _run_of(tmp_path, SETTINGS, **held)
    settings = {**SETTINGS, **changes}
    if refused is None:
        check_run_reuse(run, settings)
        return
    with pytest.raises(FileExistsError) as caught:
        check_run_reuse(run, settings)
    assert str(caught.value).startswith(f"{run.path} holds ") and refused in str(caught.value)


def test_a_fine_tuning_run_s_tokenizers_are_its_start_s(tmp_path):
    from keras_transformer.training.run_directory import check_run_reuse

    run = _run_of(tmp_path, {**SETTINGS, "init_from": "runs/base"})
    check_run_reuse(run, {**SETTINGS, "init_from": "runs/base", "vocab_size": 8000})
    with pytest.raises(FileExistsError, match="init_from 'runs/base', not 'runs/other'"):
        check_run_reuse(run, {**SETTINGS, "init_from": "runs/other"})


@pytest.mark.parametrize(
    "damaged, content, problem",
    [
        ("config.json", b"{bad", "config.json is not a JSON file: Expecting property name"),
        ("model_config.json", b"\xff\xfe", "model_config.json is not a JSON file: 'utf-8' codec"),
        ("final.weights.h5", b"junk", "final.weights.h5 cannot be loaded into the run's model: "
                                      "Unable to synchronously open file"),
        ("tokenizers/source.model", b"junk",
         "source.model cannot be read as a tokenizer: no SentencePiece model"),
    ],
)  # fmt: skip
def test_a_damaged_run_file_is_named(trained_run, tmp_path, damaged, content, problem):
    import shutil

    path = str(tmp_path / "run")
    shutil.copytree(trained_run["run"], path)
    with open(os.path.join(path, damaged), "wb") as f:
        f.write(content)
    with pytest.raises(ValueError) as caught:
        load_run(path, weights="final")
    assert str(caught.value).startswith(os.path.join(path, os.path.dirname(damaged)))
    assert problem in str(caught.value)


def test_weights_of_another_architecture_are_named(trained_run, tmp_path):
    import shutil

    path = str(tmp_path / "run")
    shutil.copytree(trained_run["run"], path)
    run = RunDirectory(path)
    other = build_run_model(run, overrides={"dff": 2 * run.read_json(run.model_config)["dff"]})
    other.save_weights(os.path.join(path, "final.weights.h5"))
    with pytest.raises(ValueError, match="final.weights.h5 cannot be loaded into the run's model"):
        load_run(path, weights="final")
