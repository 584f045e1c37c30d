"""`keras-transformer tune`: a keras-tuner search over corpus data.

On one machine, or distributed the keras-tuner way: run the same command
with `KERASTUNER_TUNER_ID=chief` (it serves the oracle) and on each worker
with `KERASTUNER_TUNER_ID=tuner0, tuner1, ...`, all with
`KERASTUNER_ORACLE_IP` and `KERASTUNER_ORACLE_PORT` naming the chief.
An interrupted search started again with the same command resumes
(`overwrite=False`): finished trials are kept, unfinished ones rerun.
"""

import dataclasses
import json
import os
import shutil

import keras

from keras_transformer._extras import require
from keras_transformer.data import pipeline, sources
from keras_transformer.training.run_directory import RunDirectory
from keras_transformer.training.trainer import prepare_tokenizers
from keras_transformer.tuning.bleu_callback import BleuCallback
from keras_transformer.tuning.config import OBJECTIVES, TUNERS, TuneConfig
from keras_transformer.tuning.hypermodel import MODEL_DIMENSIONS, TransformerHyperModel

# Validation batches: one budget for every trial, so scores compare.
VALID_BATCH_TOKENS = 4096


def _is_chief():
    return os.environ.get("KERASTUNER_TUNER_ID", "chief") == "chief"


def make_tuner(kind, hypermodel, objective, directory, max_trials, epochs, seed=0):
    """The keras-tuner tuner `kind` (`random`, `hyperband`, `bayesian`)."""
    keras_tuner = require("keras_tuner")

    objective = keras_tuner.Objective(objective, OBJECTIVES.get(objective, "min"))
    common = dict(
        objective=objective, directory=directory, project_name="search", overwrite=False, seed=seed
    )
    if kind == "random":
        return keras_tuner.RandomSearch(hypermodel, max_trials=max_trials, **common)
    if kind == "bayesian":
        return keras_tuner.BayesianOptimization(hypermodel, max_trials=max_trials, **common)
    if kind == "hyperband":
        return keras_tuner.Hyperband(hypermodel, max_epochs=max(epochs, 2), **common)
    raise ValueError(f"`tuner` must be one of {TUNERS}. Received: tuner={kind!r}")


def results_table(tuner, objective, top=10):
    """A text table of the best trials."""
    trials = tuner.oracle.get_best_trials(top)
    if not trials:
        return "no completed trials"
    keys = sorted(trials[0].hyperparameters.values)
    header = ["trial", objective] + keys
    rows = [
        [t.trial_id, f"{t.score:.4f}" if t.score is not None else "-"]
        + [str(t.hyperparameters.values.get(k)) for k in keys]
        for t in trials
    ]
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in [header] + rows]
    return "\n".join(lines)


def _config(options):
    return options if isinstance(options, TuneConfig) else TuneConfig.from_dict(dict(options))


def run_search(options, log=print):
    """Runs the search described by `options`.

    Args:
        options: a `TuneConfig`, or a dict of its keys.
        log: where progress lines go.

    Returns:
        The best `keras_tuner.HyperParameters` (None on a chief, whose job
        is serving the oracle).
    """
    config = _config(options)
    os.makedirs(config.directory, exist_ok=True)
    run = RunDirectory(config.directory)
    keras.utils.set_random_seed(config.seed)
    train_pairs, stats = sources.load_dataset(config.dataset, "train", config.data_dir)
    log(f"Training pairs: {stats.pairs}")

    source_tok, target_tok = prepare_tokenizers(
        run, train_pairs, config.vocab_size, config.tokenizer_sample, log, save=_is_chief()
    )

    valid_spec = config.valid or sources.default_validation_spec(config.dataset)
    valid_spec = (valid_spec, "validation") if isinstance(valid_spec, str) else valid_spec
    if valid_spec is None:
        raise ValueError("Tuning needs validation data: pass --valid for parallel files")
    valid_pairs, _ = sources.load_dataset(valid_spec[0], valid_spec[1], config.data_dir)

    callbacks = []
    if config.objective == "val_bleu":
        src, refs = sources.sentences(valid_pairs, limit=config.bleu_sentences)
        callbacks.append(
            BleuCallback(src, refs, source_tok, target_tok, max_length=config.max_length)
        )
    hypermodel = TransformerHyperModel(
        source_tok.vocab_size,
        target_tok.vocab_size,
        max_length=max(config.max_length, 256),
        objective_callbacks=callbacks,
        jit_compile=config.jit_compile,
        **config.space,
    )
    tuner = make_tuner(
        config.tuner,
        hypermodel,
        config.objective,
        config.directory,
        config.max_trials,
        config.epochs,
        config.seed,
    )

    # The training pipeline's examples; each trial batches them by its
    # sampled token budget (`TransformerHyperModel.fit`).
    train_examples = pipeline.frame_examples(
        train_pairs, source_tok, target_tok, config.max_length
    ).cache()
    train_examples = train_examples.shuffle(20_000, seed=config.seed)
    if config.steps_per_epoch:
        train_examples = train_examples.repeat()
    train_examples = train_examples.map(lambda s, t_in, t_out: ((s, t_in), t_out))
    valid_batches = pipeline.make_batches(
        valid_pairs,
        source_tok,
        target_tok,
        batch_tokens=max(VALID_BATCH_TOKENS, config.max_length),
        max_length=config.max_length,
        shuffle=False,
    )
    tuner.search(
        train_examples,
        validation_data=valid_batches,
        epochs=config.epochs,
        steps_per_epoch=config.steps_per_epoch,
        verbose=config.verbose,
    )
    if not _is_chief() and "KERASTUNER_ORACLE_IP" in os.environ:
        return None
    log("\n" + results_table(tuner, config.objective))
    best = tuner.get_best_hyperparameters(1)[0]
    with open(os.path.join(config.directory, "best_hyperparameters.json"), "w") as f:
        json.dump(best.values, f, indent=2, sort_keys=True)
    log(f"Best hyperparameters: {json.dumps(best.values, sort_keys=True)}")
    if config.train_best:
        train_best(config, best, run, log)
    return best


def train_best(options, best, search_run, log=print):
    """Trains the best configuration into `DIRECTORY/best_run`, a normal run
    directory that `evaluate` and `export` accept.

    Args:
        options: the search's `TuneConfig` (or a dict of its keys).
        best: the best `keras_tuner.HyperParameters`.
        search_run: the search's `RunDirectory` (its tokenizers are reused).
        log: where progress lines go.

    Returns:
        The path of the run directory.
    """
    from keras_transformer.training import TrainConfig, train

    config = _config(options)
    output = os.path.join(config.directory, "best_run")
    target = RunDirectory(output)
    os.makedirs(os.path.dirname(target.source_tokenizer), exist_ok=True)
    for name in ("source", "target"):
        for ext in (".model", ".vocab"):
            shutil.copy(
                os.path.join(search_run.path, "tokenizers", name + ext),
                os.path.join(target.path, "tokenizers", name + ext),
            )
    values = best.values
    # The options both configs name (data, lengths, vocabulary, seed,
    # jit_compile, ...) carry over by name, so none is dropped.
    tune_fields = {f.name for f in dataclasses.fields(config)}
    shared = {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(TrainConfig)
        if f.name in tune_fields
    }
    train_config = TrainConfig(
        **{
            **shared,
            "epochs": config.best_epochs or config.epochs,
            "output_dir": output,
            "preset": "tiny",
            "model_overrides": {k: values[k] for k in MODEL_DIMENSIONS},
            "warmup_steps": int(values["warmup_steps"]),
            "label_smoothing": float(values["label_smoothing"]),
            "batch_tokens": int(values.get("batch_tokens", 4096)),
        }
    )
    log(f"Training the best configuration into {output}")
    train(train_config, log=log)
    return output
