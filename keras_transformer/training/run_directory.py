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

    def is_finished(self):
        """Whether a training run ended here: its final weights written and
        its backup removed (a run killed between the two resumes)."""
        return os.path.exists(self.final_weights) and not self.has_backup()

    def has_backup(self):
        """Whether a backup to resume from is here (a run was killed)."""
        return os.path.isdir(self.backup) and bool(os.listdir(self.backup))

    def has_tokenizers(self):
        return os.path.exists(self.source_tokenizer) and os.path.exists(self.target_tokenizer)

    def write_json(self, path, values):
        write_json_atomically(path, values)

    def read_json(self, path):
        """The JSON file at `path`; one that is not JSON (damaged) is
        refused naming it."""
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except ValueError as error:  # not JSON, or not UTF-8
            raise ValueError(f"{path} is not a JSON file: {error}") from None


def load_weights_file(model, path):
    """`model.load_weights(path)`; a file that is not Keras weights (damaged)
    or not of `model`'s architecture is refused naming it."""
    try:
        model.load_weights(path)
    except (OSError, ValueError) as error:  # h5py's, or Keras' for the shapes
        detail = " ".join(str(error).split())
        raise ValueError(f"{path} cannot be loaded into the run's model: {detail}") from None


# The settings a run's tokenizers are learned with, and those its model is
# built with: a run directory is trained into again only with the same.
# With `init_from` the tokenizers are the start's (copied in), whatever
# the vocabulary settings say.
VOCABULARY_SETTINGS = ("vocab_size", "joint_vocabulary", "tokenizer_sample")
TOKENIZER_SETTINGS = ("init_from", *VOCABULARY_SETTINGS)
MODEL_SETTINGS = ("preset", "model_overrides", "max_length")


def check_run_reuse(run, settings):
    """Raises unless `train` with `settings` (a `TrainConfig.to_dict()`)
    may write into `run`: a new or empty folder; one holding only the
    tokenizers of the same settings (a run that stopped before training,
    or tokenizers put there to be reused); or a backup of a run of the same
    settings, which it resumes.

    Raises:
        FileExistsError: `run` holds a finished run (whose weights, best
            weights and history a new run would overwrite or mix with its
            own), or tokenizers or a backup of other settings (named).
    """
    resuming = run.has_backup()
    if run.is_finished():
        raise FileExistsError(
            f"{run.path} holds a finished run ({os.path.basename(run.final_weights)}): give "
            f"a new --output-dir, or start a new run from it with --init-from {run.path}"
        )
    if not os.path.exists(run.config) or not (resuming or run.has_tokenizers()):
        return
    before = run.read_json(run.config)
    keys = TOKENIZER_SETTINGS + (MODEL_SETTINGS if resuming else ())
    if before.get("init_from") is not None and before.get("init_from") == settings.get("init_from"):
        keys = tuple(k for k in keys if k not in VOCABULARY_SETTINGS)
    changed = [
        f"{key} {before[key]!r}, not {settings.get(key)!r}"
        for key in keys
        if key in before and before[key] != settings.get(key)
    ]
    if changed:
        held = "the backup of a run" if resuming else "the tokenizers of a run"
        raise FileExistsError(
            f"{run.path} holds {held} of other settings ({'; '.join(changed)}): give the "
            "same settings to resume it, or a new --output-dir"
        )


WEIGHTS = ("auto", "averaged", "best", "final")


def read_generation(path):
    """The run's generation settings (`generation.json`), or {} if it has
    none: fields of `decoding.GenerationConfig` (which reads them)."""
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
    load_weights_file(model, weights_path(run, weights))
    source = load_tokenizer(run.source_tokenizer)
    target = load_tokenizer(run.target_tokenizer)
    return model, source, target, run.read_json(run.config)
