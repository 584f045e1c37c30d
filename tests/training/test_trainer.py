import csv
import json
import os
import shutil
import signal
import time

import numpy as np
import pytest

from keras_transformer import cli as keras_transformer_cli
from keras_transformer.training.run_directory import RunDirectory, build_run_model, load_run
from tests.training.conftest import TINY, cli


def _history_epochs(run):
    with open(os.path.join(run, "history.csv")) as f:
        return [int(row["epoch"]) for row in csv.DictReader(f)]


def test_train_evaluate_and_plot(parallel_files, tmp_path, capsys):
    run = str(tmp_path / "run")
    dataset = f"parallel:{parallel_files['train.en']},{parallel_files['train.de']}"
    valid = f"parallel:{parallel_files['test.en']},{parallel_files['test.de']}"
    proc = cli(
        "train",
        "--dataset",
        dataset,
        "--valid",
        valid,
        "--output-dir",
        run,
        "--epochs",
        "3",
        "--steps-per-epoch",
        "10",
        "--average-last",
        "2",
        *TINY,
    )
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    assert "Length filter:" in out and "Training pairs: 1000" in out
    assert "Averaged the weights of epochs 2-3" in out
    # Keras' warnings about shuffling and the end of the data do not apply
    # to training's own datasets.
    assert "UserWarning" not in out, out[-3000:]
    assert sorted(os.listdir(os.path.join(run, "epochs"))) == [
        "epoch_0002.weights.h5",
        "epoch_0003.weights.h5",
    ]
    averaged = json.load(open(os.path.join(run, "averaged.json")))
    assert averaged["epochs"] == [2, 3] and averaged["val_loss"] > 0
    for name in (
        "config.json",
        "model_config.json",
        "tokenizers/source.model",
        "tokenizers/target.model",
        "tokenizers/target.vocab",
        "best.weights.h5",
        "final.weights.h5",
        "history.csv",
        "data_stats.json",
    ):
        assert os.path.exists(os.path.join(run, name)), name
    assert os.listdir(os.path.join(run, "logs"))  # TensorBoard
    assert _history_epochs(run) == [0, 1, 2]

    report = str(tmp_path / "scores.json")
    proc = cli(
        "evaluate",
        "--run",
        run,
        "--source",
        parallel_files["test.en"],
        "--reference",
        parallel_files["test.de"],
        "--beam-size",
        "2",
        "--json",
        report,
        "--output",
        str(tmp_path / "hyp.txt"),
    )
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    assert "BLEU = " in out and "chrF = " in out and "nrefs:1|case:mixed" in out
    scores = json.load(open(report))
    assert 0.0 <= scores["bleu"] <= 100.0 and scores["sentences"] == 40
    assert scores["weights"] == "auto"
    assert len(open(tmp_path / "hyp.txt", encoding="utf-8").read().splitlines()) == 40

    # Re-averaging the last epoch alone gives that epoch's weights; `best`
    # still decodes with the best checkpoint.
    # The commands below run in this process: `train` and `evaluate` above
    # ran as processes of their own.
    capsys.readouterr()
    assert keras_transformer_cli.main(["average", "--run", run, "--last", "1"]) == 0
    assert "Averaged epochs 3 into" in capsys.readouterr().out
    averaged_model = load_run(run, weights="averaged")[0]
    last_epoch = build_run_model(RunDirectory(run))
    last_epoch.load_weights(os.path.join(run, "epochs", "epoch_0003.weights.h5"))
    for got, want in zip(averaged_model.get_weights(), last_epoch.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert json.load(open(os.path.join(run, "averaged.json")))["epochs"] == [3]
    evaluate = ["evaluate", "--run", run, "--source", parallel_files["test.en"],
                "--reference", parallel_files["test.de"], "--beam-size", "1",
                "--weights", "best", "--json", report]  # fmt: skip
    assert keras_transformer_cli.main(evaluate) == 0
    assert json.load(open(report))["weights"] == "best"

    assert keras_transformer_cli.main(["plot", "--run", run]) == 0
    for name in ("curves.png", "learning_rate.png"):
        with open(os.path.join(run, name), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_config_file_with_flag_override(parallel_files, tmp_path):
    import yaml

    run = str(tmp_path / "run")
    config = tmp_path / "train.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "dataset": f"parallel:{parallel_files['train.en']},{parallel_files['train.de']}",
                "output_dir": run,
                "epochs": 5,
                "steps_per_epoch": 3,
                "vocab_size": 120,
                "preset": "tiny",
                "model_overrides": {"num_layers": 1, "d_model": 32, "num_heads": 2, "dff": 64},
                "batch_tokens": 512,
                "max_length": 64,
                "verbose": 2,
            }
        )
    )
    proc = cli("train", "--config", str(config), "--epochs", "1")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    saved = json.load(open(os.path.join(run, "config.json")))
    assert saved["epochs"] == 1 and saved["steps_per_epoch"] == 3


def test_bad_input_gives_a_clear_error(parallel_files, tmp_path):
    proc = cli(
        "train",
        "--dataset",
        f"parallel:{parallel_files['train.en']},{parallel_files['test.de']}",
        "--output-dir",
        str(tmp_path / "run"),
    )
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 2
    assert "has 1000" in out and "has 40" in out and "Traceback" not in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("epochs: 2\nlearning_rate: 3\n")
    proc = cli("train", "--config", str(bad))
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 2 and "learning_rate" in out


def test_killed_training_resumes_from_its_last_checkpoint(parallel_files, tmp_path):
    run = str(tmp_path / "run")
    args = [
        "train",
        "--dataset",
        f"parallel:{parallel_files['train.en']},{parallel_files['train.de']}",
        "--output-dir",
        run,
        "--epochs",
        "4",
        "--steps-per-epoch",
        "12",
        "--checkpoint-every",
        "4",
        *TINY,
    ]
    metadata = os.path.join(run, "backup", "training_metadata.json")
    proc = cli(*args, start_new_session=True)
    deadline = time.time() + 600
    while time.time() < deadline:
        if os.path.exists(metadata):
            try:
                state = json.load(open(metadata))
            except ValueError:
                state = {}
            if state.get("epoch", 0) >= 2 and state.get("batch", 0) > 0:
                break  # mid-way through the third epoch
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not os.path.exists(os.path.join(run, "final.weights.h5"))
    killed_at = json.load(open(metadata))["epoch"]

    proc = cli(*args)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    assert "Resuming from the last checkpoint" in out
    assert f"Epoch {killed_at + 1}/4" in out and "Epoch 1/4" not in out
    assert "Reusing the tokenizers" in out
    assert sorted(set(_history_epochs(run))) == [0, 1, 2, 3]
    assert os.path.exists(os.path.join(run, "final.weights.h5"))


def test_joint_vocabulary_with_shared_embeddings_and_peak_rate(parallel_files, tmp_path):
    run = str(tmp_path / "run")
    dataset = f"parallel:{parallel_files['train.en']},{parallel_files['train.de']}"
    proc = cli(
        "train", "--dataset", dataset, "--valid", "none", "--output-dir", run,
        "--preset", "transformer_tiny", "--joint-vocabulary", "--vocab-size", "200",
        "--peak-learning-rate", "0.005", "--warmup-steps", "4", "--batch-tokens", "512",
        "--max-length", "64", "--epochs", "1", "--steps-per-epoch", "3", "--verbose", "2",
    )  # fmt: skip
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    assert "one joint 200-piece vocabulary" in out
    files = RunDirectory(run)
    with open(files.source_tokenizer, "rb") as a, open(files.target_tokenizer, "rb") as b:
        assert a.read() == b.read()
    model, source, target, _ = load_run(run)
    assert model.share_embeddings and model.output_projection is None
    assert source.vocab_size == target.vocab_size == model.source_vocab_size
    config = json.load(open(os.path.join(run, "config.json")))
    assert config["peak_learning_rate"] == 0.005 and config["joint_vocabulary"]


@pytest.mark.parametrize("changes", [{}, {"preset": "small", "epochs": 3}])
def test_a_finished_run_is_never_trained_into_again(trained_run, tmp_path, changes):
    from keras_transformer.training import TrainConfig, train

    run = str(tmp_path / "run")
    shutil.copytree(trained_run["run"], run)
    kept = ("config.json", "final.weights.h5", "best.weights.h5", "history.csv")
    before = {name: open(os.path.join(run, name), "rb").read() for name in kept}
    config = {**json.load(open(os.path.join(run, "config.json"))), **changes, "output_dir": run}
    with pytest.raises(FileExistsError, match="holds a finished run .* --init-from"):
        train(TrainConfig.from_dict(config), log=lambda *_: None)
    for name, data in before.items():
        assert open(os.path.join(run, name), "rb").read() == data, name
