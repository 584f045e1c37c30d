import json
import os
import re

import pytest

from tests.processes import free_port, start_python

SPACE = json.dumps(
    {
        "num_layers": [1],
        "d_model": [16, 32],
        "num_heads": [2, 4],
        "dff": [32],
        "dropout": {"min": 0.0, "max": 0.2, "step": 0.1},  # a range: hp.Float
        "warmup_steps": [10, 20],
        "batch_tokens": [256, 512],
    }
)


def _tune(files, directory, *extra, env=None):
    args = [
        "-m",
        "keras_transformer.cli",
        "tune",
        "--dataset",
        f"parallel:{files['train.en']},{files['train.de']}",
        "--valid",
        f"parallel:{files['test.en']},{files['test.de']}",
        "--directory",
        directory,
        "--epochs",
        "1",
        "--steps-per-epoch",
        "3",
        "--vocab-size",
        "120",
        "--max-length",
        "48",
        "--space",
        SPACE,
        *extra,
    ]
    return start_python(*args, env=env)


def _tune_to_end(files, directory, *extra):
    """`_tune` run to its end, which must succeed; returns its output."""
    proc = _tune(files, directory, *extra)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-4000:]
    return out


def _trials(directory):
    root = os.path.join(directory, "search")
    trials = {}
    for name in os.listdir(root):
        path = os.path.join(root, name, "trial.json")
        if name.startswith("trial_") and os.path.exists(path):
            trials[name] = json.load(open(path))
    return trials


def _check_completed(directory, trials, objective, out):
    done = _trials(directory)
    assert len(done) == trials, out[-3000:]
    assert all(t["status"] == "COMPLETED" for t in done.values())
    assert all(objective in t["metrics"]["metrics"] for t in done.values())
    best = json.load(open(os.path.join(directory, "best_hyperparameters.json")))
    assert best["d_model"] % best["num_heads"] == 0
    assert "trial" in out and objective in out  # the results table
    # Each trial shows its steps as they run (and, past one epoch, its
    # epochs), as `train` does.
    assert re.search(r"(?<!\d)3/3(?!\d)", out), out[-3000:]
    # Keras' warnings about shuffling and the end of the data do not apply
    # to the search's own datasets.
    assert "UserWarning" not in out, out[-3000:]
    return done, best


def test_an_interrupted_search_resumes_and_trains_the_best(parallel_files, tmp_path):
    """A search of one trial, then the same command asking for two: the
    first trial is kept, not rerun, and the best of both is trained. Every
    trial reports BLEU, the objective here (a search's own objective,
    `val_masked_accuracy`, is the distributed search's below)."""
    directory = str(tmp_path / "tuning")
    objective = "val_bleu"
    flags = ("--objective", objective)
    out = _tune_to_end(parallel_files, directory, "--max-trials", "1", *flags)
    first, _ = _check_completed(directory, 1, objective, out)
    out = _tune_to_end(parallel_files, directory, "--max-trials", "2", "--train-best", *flags)
    after, best = _check_completed(directory, 2, objective, out)
    ((name, trial),) = first.items()
    assert after[name]["score"] == trial["score"]  # kept, not rerun
    assert "Reusing the tokenizers" in out
    from keras_transformer.training import load_run

    model, _, _, _ = load_run(os.path.join(directory, "best_run"))
    assert model.d_model == best["d_model"]


def test_distributed_search_shares_trials(parallel_files, tmp_path):
    directory = str(tmp_path / "tuning")
    port = str(free_port())
    common = {"KERASTUNER_ORACLE_IP": "127.0.0.1", "KERASTUNER_ORACLE_PORT": port}
    chief = _tune(
        parallel_files,
        directory,
        "--max-trials",
        "2",
        env={**common, "KERASTUNER_TUNER_ID": "chief"},
    )
    workers = [
        _tune(
            parallel_files,
            directory,
            "--max-trials",
            "2",
            env={**common, "KERASTUNER_TUNER_ID": f"tuner{i}"},
        )
        for i in range(2)
    ]
    outs = [w.communicate(timeout=900)[0] for w in workers]
    chief_out = chief.communicate(timeout=300)[0]
    for proc, out in zip(workers + [chief], outs + [chief_out]):
        assert proc.returncode == 0, out[-3000:]
    trials = _trials(directory)
    completed = [t for t in trials.values() if t["status"] == "COMPLETED"]
    assert len(completed) == 2
    # Each worker ran its own trials: no hyperparameter set twice.
    assignments = [json.dumps(t["hyperparameters"]["values"], sort_keys=True) for t in completed]
    assert len(set(assignments)) == len(assignments)
    # One epoch per trial: across the workers' logs, each trial trained once.
    assert sum(len(re.findall(r" - val_masked_accuracy: ", out)) for out in outs) == 2


@pytest.mark.parametrize("earlier", ["finished", "killed-other-best", "killed-same-best"])
def test_the_best_run_of_an_earlier_search_is_replaced_or_resumed(tmp_path, monkeypatch, earlier):
    """A search run again may find another best: its best run is trained
    anew (a finished one, or a killed one of another best), or resumed (a
    killed one of the same best)."""
    import types

    import keras_transformer.training as training
    from keras_transformer.training.run_directory import RunDirectory
    from keras_transformer.tuning.config import TuneConfig
    from keras_transformer.tuning.search import train_best

    trained = []
    monkeypatch.setattr(training, "train", lambda config, log=None: trained.append(config))
    search_run = tmp_path / "search"
    (search_run / "tokenizers").mkdir(parents=True)
    for name in ("source.model", "source.vocab", "target.model", "target.vocab"):
        (search_run / "tokenizers" / name).write_text(name)
    options = TuneConfig(dataset="synthetic", directory=str(tmp_path / "tune"), verbose=0)
    values = dict(num_layers=2, d_model=32, num_heads=4, dff=64, dropout=0.2, norm_first=True)
    values.update(warmup_steps=30, label_smoothing=0.05)

    def run_best(values):
        best = types.SimpleNamespace(values=values)
        logged = []
        train_best(options, best, types.SimpleNamespace(path=str(search_run)), log=logged.append)
        return logged

    run_best(values)
    run = RunDirectory(str(tmp_path / "tune" / "best_run"))
    run.write_json(run.config, trained[-1].to_dict())  # as train leaves it
    leftover = run.final_weights if earlier == "finished" else run.join("backup", "metadata")
    os.makedirs(os.path.dirname(leftover), exist_ok=True)
    open(leftover, "w").close()
    again = dict(values, d_model=64) if earlier != "killed-same-best" else values
    logged = run_best(again)
    replaced = earlier != "killed-same-best"
    assert any("Replacing the best run" in line for line in logged) == replaced
    assert os.path.exists(leftover) != replaced
    assert trained[-1].model_overrides["d_model"] == again["d_model"] and run.has_tokenizers()


@pytest.mark.parametrize("jit_compile, best_epochs", [(True, 5), (False, None)])
def test_the_best_run_keeps_the_searchs_options(tmp_path, monkeypatch, jit_compile, best_epochs):
    import types

    import keras_transformer.training as training
    from keras_transformer.tuning.config import TuneConfig
    from keras_transformer.tuning.search import train_best

    seen = {}
    monkeypatch.setattr(training, "train", lambda config, log=None: seen.setdefault("c", config))
    search_run = tmp_path / "search"
    (search_run / "tokenizers").mkdir(parents=True)
    for name in ("source.model", "source.vocab", "target.model", "target.vocab"):
        (search_run / "tokenizers" / name).write_text(name)
    options = TuneConfig(
        dataset="synthetic",
        directory=str(tmp_path / "tune"),
        epochs=3,
        best_epochs=best_epochs,
        steps_per_epoch=11,
        max_length=40,
        vocab_size=300,
        tokenizer_sample=500,
        jit_compile=jit_compile,
        seed=7,
        verbose=0,
    )
    values = dict(num_layers=2, d_model=32, num_heads=4, dff=64, dropout=0.2)
    values.update(norm_first=True, warmup_steps=30, label_smoothing=0.05, batch_tokens=512)
    path = train_best(
        options,
        types.SimpleNamespace(values=values),
        types.SimpleNamespace(path=str(search_run)),
        log=lambda *_: None,
    )

    config = seen["c"]
    assert config.output_dir == path == str(tmp_path / "tune" / "best_run")
    assert (config.jit_compile, config.seed, config.verbose) == (jit_compile, 7, 0)
    assert (config.max_length, config.vocab_size, config.tokenizer_sample) == (40, 300, 500)
    assert (config.epochs, config.steps_per_epoch) == (best_epochs or 3, 11)
    assert (config.dataset, config.preset) == ("synthetic", "tiny")
    assert config.model_overrides == {k: values[k] for k in list(values)[:6]}
    assert (config.warmup_steps, config.label_smoothing, config.batch_tokens) == (30, 0.05, 512)
    assert (
        tmp_path / "tune" / "best_run" / "tokenizers" / "target.vocab"
    ).read_text() == "target.vocab"
