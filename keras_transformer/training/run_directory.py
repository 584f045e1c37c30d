"""The layout of a run directory, and loading a trained run back."""

import json
import os

from keras_transformer.data.vocabulary_tokenizer import load_tokenizer
from keras_transformer.models.transformer import Transformer
from keras_transformer.training.atomic_files import write_json_atomically


class RunDirectory:
    """Paths of a run: config, tokenizers, weights, logs, backups.

    ```
    runs/NAME/
      config.json            training configuration
      model_config.json      Transformer.get_config()
      tokenizers/source.model, target.model (+ .vocab)
      best.weights.h5        best weights by validation loss, and best.json (its epoch, loss)
      final.weights.h5       weights at the end of training
      epochs/                the last epochs' weights (with `average_last`)
      averaged.weights.h5    their average, and averaged.json (which epochs)
      history.csv            one row per epoch
      logs/                  TensorBoard
      backup/                the last backup, for resuming (removed at the end)
      data_stats.json        corpus and length statistics
      generation.json        decoding settings the exports default to (an
                             imported checkpoint's: beams, length penalty)
    ```
    """

    def __init__(self, path):
        self.path = os.path.abspath(path)

    def join(self, *parts):
        return os.path.join(self.path, *parts)

    config = property(lambda self: self.join("config.json"))
    model_config = property(lambda self: self.join("model_config.json"))
    source_tokenizer = property(lambda self: self.join("tokenizers", "source.model"))
    target_tokenizer = property(lambda self: self.join("tokenizers", "target.model"))
    best_weights = property(lambda self: self.join("best.weights.h5"))
    final_weights = property(lambda self: self.join("final.weights.h5"))
    epoch_weights = property(lambda self: self.join("epochs"))
    averaged_weights = property(lambda self: self.join("averaged.weights.h5"))
    averaged_info = property(lambda self: self.join("averaged.json"))
    history = property(lambda self: self.join("history.csv"))
    logs = property(lambda self: self.join("logs"))
    backup = property(lambda self: self.join("backup"))
    data_stats = property(lambda self: self.join("data_stats.json"))
    generation = property(lambda self: self.join("generation.json"))

    def has_tokenizers(self):
        return os.path.exists(self.source_tokenizer) and os.path.exists(self.target_tokenizer)

    def write_json(self, path, values):
        write_json_atomically(path, values)

    def read_json(self, path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)


WEIGHTS = ("auto", "averaged", "best", "final")


def read_generation(path):
    """The run's generation settings (`generation.json`), or {} if it has
    none: the keys of `export.options.DECODING_DEFAULTS` it sets."""
    run = RunDirectory(path)
    if not os.path.exists(run.generation):
        return {}
    return run.read_json(run.generation)


def build_run_model(run, overrides=None):
    """The run's Transformer, built from `model_config.json` (with
    `overrides` of its constructor arguments), in the global dtype policy
    (float32 unless set)."""
    if not os.path.exists(run.model_config):
        raise FileNotFoundError(f"{run.path} is not a training run: {run.model_config} is missing")
    model_config = {**run.read_json(run.model_config), **(overrides or {})}
    model_config.pop("dtype", None)
    model = Transformer.from_config(model_config)
    model.build(((None, None), (None, None)))
    return model


def weights_path(run, weights="auto"):
    """The file of the run's `weights` (see `load_run`)."""
    if weights not in WEIGHTS:
        raise ValueError(f"`weights` must be one of {WEIGHTS}. Received: weights={weights!r}")
    candidates = {
        "auto": [run.averaged_weights, run.best_weights, run.final_weights],
        "averaged": [run.averaged_weights],
        "best": [run.best_weights, run.final_weights],
        "final": [run.final_weights],
    }[weights]
    for candidate in candidates:
        if os.path.exists(candidate):
            return candidate
    raise FileNotFoundError(f"No weights in {run.path} (looked for {candidates})")


def load_run(path, weights="auto"):
    """Loads a trained run for inference.

    Args:
        path: the run directory.
        weights: `"auto"` (the averaged weights when the run has them,
            else the best, else the final), `"averaged"`, `"best"` (falls
            back to final) or `"final"`.

    Returns:
        `(model, source_tokenizer, target_tokenizer, config_dict)`.
    """
    if weights not in WEIGHTS:
        raise ValueError(f"`weights` must be one of {WEIGHTS}. Received: weights={weights!r}")
    run = RunDirectory(path)
    model = build_run_model(run)
    model.load_weights(weights_path(run, weights))
    source = load_tokenizer(run.source_tokenizer)
    target = load_tokenizer(run.target_tokenizer)
    return model, source, target, run.read_json(run.config)
