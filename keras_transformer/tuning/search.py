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
import shutil

import keras

from keras_transformer._extras import require
from keras_transformer.data import sources
from keras_transformer.training import keras_adapter
from keras_transformer.training.preparation import prepare_data
from keras_transformer.training.run_directory import RunDirectory, check_run_reuse
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
    data = prepare_data(config, run, log, save=_is_chief())

    callbacks = []
    if config.objective == "val_bleu":
        src, refs = sources.sentences(data.valid_pairs, limit=config.bleu_sentences)
        callbacks.append(
            BleuCallback(
                src,
                refs,
                data.source_tokenizer,
                data.target_tokenizer,
                max_length=config.max_length,
            )
        )
    hypermodel = TransformerHyperModel(
        data.source_tokenizer.vocab_size,
        data.target_tokenizer.vocab_size,
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
    train_examples = data.train_examples(
        seed=config.seed, repeat=config.steps_per_epoch is not None
    ).map(lambda s, t_in, t_out: ((s, t_in), t_out))
    valid_batches = data.valid_batches(max(VALID_BATCH_TOKENS, config.max_length))
    with keras_adapter.data_ends_epochs():
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
    values = best.values
    train_config = TrainConfig(
        **config.data_options(),
        output_dir=output,
        epochs=config.best_epochs or config.epochs,
        steps_per_epoch=config.steps_per_epoch,
        jit_compile=config.jit_compile,
        seed=config.seed,
        verbose=config.verbose,
        preset="tiny",
        model_overrides={k: values[k] for k in MODEL_DIMENSIONS if k in values},
        warmup_steps=int(values["warmup_steps"]),
        lr_scale=float(values.get("lr_scale", 1.0)),
        label_smoothing=float(values["label_smoothing"]),
        batch_tokens=int(values.get("batch_tokens", 4096)),
    )
    try:
        check_run_reuse(target, train_config.to_dict())
    except FileExistsError:
        # The best run of an earlier search (finished, or of another
        # best): the search's own output, made again from its trials.
        log(f"Replacing the best run of an earlier search in {output}")
        shutil.rmtree(output)
    _copy_tokenizers(search_run, target)
    log(f"Training the best configuration into {output}")
    train(train_config, log=log)
    return output


def _copy_tokenizers(search_run, target):
    """The search's tokenizers into the best run: it tokenizes as its trials."""
    os.makedirs(os.path.dirname(target.source_tokenizer), exist_ok=True)
    for name in ("source", "target"):
        for ext in (".model", ".vocab"):
            shutil.copy(
                os.path.join(search_run.path, "tokenizers", name + ext),
                os.path.join(target.path, "tokenizers", name + ext),
            )
