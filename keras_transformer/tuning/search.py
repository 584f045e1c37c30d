"""`keras-transformer tune`: a keras-tuner search over corpus data.

On one machine, or distributed the keras-tuner way: run the same command
with `KERASTUNER_TUNER_ID=chief` (it serves the oracle) and on each worker
with `KERASTUNER_TUNER_ID=tuner0, tuner1, ...`, all with
`KERASTUNER_ORACLE_IP` and `KERASTUNER_ORACLE_PORT` naming the chief.
An interrupted search started again with the same command resumes
(`overwrite=False`): finished trials are kept, unfinished ones rerun.
"""

import json
import os

import keras
import tensorflow as tf

from keras_transformer._extras import require
from keras_transformer.data import pipeline, sources
from keras_transformer.training.run_directory import RunDirectory
from keras_transformer.training.trainer import prepare_tokenizers
from keras_transformer.tuning.bleu_callback import BleuCallback
from keras_transformer.tuning.hypermodel import TransformerHyperModel

TUNERS = ("random", "hyperband", "bayesian")


def _is_chief():
    return os.environ.get("KERASTUNER_TUNER_ID", "chief") == "chief"


def _examples(dataset, source_tokenizer, target_tokenizer, max_length):
    """Unbatched `((source, target_in), target_out)` id sequences."""
    framed = pipeline.tokenize_pairs(
        dataset, source_tokenizer, target_tokenizer, max_length, "filter"
    )
    framed = framed.filter(lambda s, t, long: tf.logical_not(long))
    return framed.map(lambda s, t, long: ((s, t[:-1]), t[1:])).cache()


def make_tuner(kind, hypermodel, objective, directory, max_trials, epochs, seed=0):
    """The keras-tuner tuner `kind` (`random`, `hyperband`, `bayesian`)."""
    keras_tuner = require("keras_tuner")

    direction = (
        "max" if objective in ("val_bleu", "val_masked_accuracy", "masked_accuracy") else "min"
    )
    objective = keras_tuner.Objective(objective, direction)
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


def run_search(options, log=print):
    """Runs the search described by `options` (the CLI's keys).

    Keys: dataset, valid, data_dir, tuner, max_trials, epochs,
    steps_per_epoch, directory, objective, train_best, vocab_size,
    max_length, space (dict of search-space overrides), seed,
    jit_compile.

    Returns:
        The best `keras_tuner.HyperParameters` (None on a chief, whose job
        is serving the oracle).
    """
    directory = options["directory"]
    os.makedirs(directory, exist_ok=True)
    run = RunDirectory(directory)
    keras.utils.set_random_seed(options.get("seed", 0))
    train_pairs, stats = sources.load_dataset(options["dataset"], "train", options.get("data_dir"))
    log(f"Training pairs: {stats.pairs}")

    source_tok, target_tok = prepare_tokenizers(
        run,
        train_pairs,
        options.get("vocab_size", 8000),
        options.get("tokenizer_sample", 200_000),
        log,
        save=_is_chief(),
    )

    max_length = options.get("max_length", 128)
    valid_spec = options.get("valid") or sources.default_validation_spec(options["dataset"])
    valid_spec = (valid_spec, "validation") if isinstance(valid_spec, str) else valid_spec
    if valid_spec is None:
        raise ValueError("Tuning needs validation data: pass --valid for parallel files")
    valid_pairs, _ = sources.load_dataset(valid_spec[0], valid_spec[1], options.get("data_dir"))

    objective = options.get("objective") or "val_masked_accuracy"
    callbacks = []
    if objective == "val_bleu":
        src, refs = sources.sentences(valid_pairs, limit=options.get("bleu_sentences", 200))
        callbacks.append(BleuCallback(src, refs, source_tok, target_tok, max_length=max_length))
    hypermodel = TransformerHyperModel(
        source_tok.vocab_size,
        target_tok.vocab_size,
        max_length=max(max_length, 256),
        objective_callbacks=callbacks,
        jit_compile=options.get("jit_compile", False),
        **(options.get("space") or {}),
    )
    tuner = make_tuner(
        options.get("tuner", "random"),
        hypermodel,
        objective,
        directory,
        options.get("max_trials", 10),
        options.get("epochs", 2),
        options.get("seed", 0),
    )

    train_examples = _examples(train_pairs, source_tok, target_tok, max_length).shuffle(
        10_000, seed=0
    )
    valid_examples = _examples(valid_pairs, source_tok, target_tok, max_length)
    steps = options.get("steps_per_epoch")
    if steps:
        train_examples = train_examples.repeat()
    tuner.search(
        train_examples,
        validation_data=valid_examples.padded_batch(64),
        epochs=options.get("epochs", 2),
        steps_per_epoch=steps,
        verbose=options.get("verbose", 2),
    )
    if not _is_chief() and "KERASTUNER_ORACLE_IP" in os.environ:
        return None
    log("\n" + results_table(tuner, objective))
    best = tuner.get_best_hyperparameters(1)[0]
    with open(os.path.join(directory, "best_hyperparameters.json"), "w") as f:
        json.dump(best.values, f, indent=2, sort_keys=True)
    log(f"Best hyperparameters: {json.dumps(best.values, sort_keys=True)}")
    if options.get("train_best"):
        train_best(options, best, run, log)
    return best


def train_best(options, best, search_run, log=print):
    """Trains the best configuration into `DIRECTORY/best_run`, a normal run
    directory that `evaluate` and `export` accept."""
    import shutil

    from keras_transformer.training import TrainConfig, train

    output = os.path.join(options["directory"], "best_run")
    target = RunDirectory(output)
    os.makedirs(os.path.dirname(target.source_tokenizer), exist_ok=True)
    for name in ("source", "target"):
        for ext in (".model", ".vocab"):
            shutil.copy(
                os.path.join(search_run.path, "tokenizers", name + ext),
                os.path.join(target.path, "tokenizers", name + ext),
            )
    values = best.values
    config = TrainConfig(
        dataset=options["dataset"],
        valid=options.get("valid"),
        data_dir=options.get("data_dir"),
        output_dir=output,
        preset="tiny",
        model_overrides={
            k: values[k]
            for k in ("num_layers", "d_model", "num_heads", "dff", "dropout_rate", "norm_first")
        },
        warmup_steps=int(values["warmup_steps"]),
        label_smoothing=float(values["label_smoothing"]),
        epochs=options.get("best_epochs") or options.get("epochs", 2),
        steps_per_epoch=options.get("steps_per_epoch"),
        max_length=options.get("max_length", 128),
        vocab_size=options.get("vocab_size", 8000),
        verbose=options.get("verbose", 2),
    )
    log(f"Training the best configuration into {output}")
    train(config, log=log)
    return output
