"""Training configuration: one set of keys for the command line and files."""

import dataclasses
import json
import os

from keras_transformer._extras import require
from keras_transformer._validation import check_positive_int, check_positive_number, shown
from keras_transformer.data.config import DataConfig
from keras_transformer.models.presets import PRESETS

STRATEGIES = ("auto", "mirrored", "multi_worker")
BACKENDS = ("tensorflow", "jax", "torch")
FREEZABLE = ("source_embedding", "target_embedding", "encoder", "decoder")


@dataclasses.dataclass(kw_only=True)
class TrainConfig(DataConfig):
    """Everything `train` needs; the keys of YAML/JSON config files.

    The data and vocabulary keys (`dataset`, `valid`, `data_dir`,
    `max_length`, `length_policy`, `vocab_size`, `joint_vocabulary`,
    `tokenizer_sample`) are `DataConfig`'s, shared with `tune`.

    Attributes:
        output_dir: the run directory.
        preset: model architecture (`tiny`, `small`, `base`, `big`).
        model_overrides: constructor arguments replacing the preset's.
        epochs: passes over the data, or over `steps_per_epoch` steps.
        steps_per_epoch: batches per epoch (the data repeats); None for
            full passes.
        time_limit_minutes: stop at the first step past this wall-clock
            budget of the training loop (see `TimeLimit`); None for no
            limit. Not with `multi_worker`.
        average_last: keep the weights of the last N epochs and, at the
            end of training, write their average (`averaged.weights.h5`),
            which `load_run`, `evaluate` and `export` then use; 0 for none.
        batch_tokens: token budget of a batch.
        warmup_steps: learning-rate warmup.
        lr_scale: multiplier of the paper's learning rate.
        peak_learning_rate: the learning rate at the end of warmup, after
            which it decays as the inverse square root of the step
            (fairseq's `--lr` with `inverse_sqrt`); replaces `lr_scale`.
            None for the paper's `d_model^-0.5 * warmup_steps^-0.5`.
        label_smoothing: epsilon of the loss.
        mixed_precision: mixed_float16 on GPU, mixed_bfloat16 on CPU.
        jit_compile: compile the train step with XLA.
        strategy: `auto`, `mirrored` or `multi_worker` (`TF_CONFIG`).
        devices: devices for `mirrored` (default: all GPUs, else the CPU).
        checkpoint_every: steps between backups for resuming.
        backend: the Keras backend to train on (`tensorflow`, `jax` or
            `torch`); None for the one Keras is configured with. It must be
            chosen before Keras is imported, as `keras-transformer train
            --backend` does; the input pipeline is tf.data either way, and
            the run's weights load into any backend (export uses TensorFlow).
        init_from: a run directory (trained here, or made by `import` from
            a checkpoint such as OPUS-MT's) whose architecture, weights,
            tokenizers and generation settings this run starts from:
            fine-tuning. `preset` and `vocab_size` are then the run's;
            `model_overrides` may change only `dropout` and
            `attention_dropout`.
        freeze: parts of the model kept as they are during training:
            any of `source_embedding`, `target_embedding`, `encoder`,
            `decoder` (with shared embeddings, either embedding freezes
            both, and the tied output projection with them).
        seed: random seed.
        verbose: Keras progress output: 0 none, 1 a line of steps as they
            run, 2 one line per epoch.
    """

    output_dir: str = "runs/default"
    preset: str = dataclasses.field(default="tiny", metadata={"choices": tuple(PRESETS)})
    model_overrides: dict = dataclasses.field(default_factory=dict)
    epochs: int = 10
    steps_per_epoch: int | None = None
    time_limit_minutes: float | None = None
    average_last: int = 0
    batch_tokens: int = 4096
    warmup_steps: int = 4000
    lr_scale: float = 1.0
    peak_learning_rate: float | None = None
    label_smoothing: float = 0.1
    mixed_precision: bool = False
    jit_compile: bool = False
    strategy: str = dataclasses.field(default="auto", metadata={"choices": STRATEGIES})
    devices: list | None = None
    backend: str | None = dataclasses.field(default=None, metadata={"choices": BACKENDS})
    checkpoint_every: int = 200
    init_from: str | None = None
    freeze: list = dataclasses.field(default_factory=list)
    seed: int = 0
    verbose: int = dataclasses.field(default=1, metadata={"choices": (0, 1, 2)})

    def validate(self):
        super().validate()
        if self.preset not in PRESETS:
            raise ValueError(f"Unknown preset {self.preset!r}; available: {sorted(PRESETS)}")
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"`strategy` must be one of {STRATEGIES}. Received: strategy={self.strategy!r}"
            )
        for name in (
            "epochs",
            "batch_tokens",
            "warmup_steps",
            "checkpoint_every",
        ):
            check_positive_int(name, getattr(self, name))
        if (
            isinstance(self.average_last, bool)
            or not isinstance(self.average_last, int)
            or self.average_last < 0
        ):
            raise ValueError(
                f"`average_last` must be an int >= 0. Received: average_last={self.average_last!r}"
            )
        if self.steps_per_epoch is not None and self.steps_per_epoch <= 0:
            raise ValueError(
                "`steps_per_epoch` must be positive. "
                f"Received: steps_per_epoch={self.steps_per_epoch!r}"
            )
        if self.time_limit_minutes is not None:
            check_positive_number("time_limit_minutes", self.time_limit_minutes)
            if self.strategy == "multi_worker":
                # Each worker would stop on its own clock, at different steps,
                # and the others would wait for it in the all-reduce forever.
                raise ValueError("`time_limit_minutes` cannot be used with strategy='multi_worker'")
        if self.peak_learning_rate is not None:
            check_positive_number("peak_learning_rate", self.peak_learning_rate)
            if self.lr_scale != 1.0:
                raise ValueError(
                    "Give `lr_scale` or `peak_learning_rate`, not both. Received: "
                    f"lr_scale={self.lr_scale!r}, peak_learning_rate={self.peak_learning_rate!r}"
                )
        if isinstance(self.freeze, str):
            self.freeze = [part for part in self.freeze.split(",") if part]
        unknown = sorted(set(self.freeze) - set(FREEZABLE))
        if unknown:
            raise ValueError(f"`freeze` takes {list(FREEZABLE)}. Received: {unknown}")
        if not isinstance(self.model_overrides, dict):
            raise ValueError(
                "`model_overrides` must be a JSON object of Transformer arguments. "
                f"Received: model_overrides={shown(self.model_overrides)}"
            )
        if self.init_from is not None:
            changed = sorted(set(self.model_overrides) - {"dropout", "attention_dropout"})
            if changed:
                raise ValueError(
                    f"With `init_from` the architecture is the run's; `model_overrides` may "
                    f"set dropout and attention_dropout only. Received: {changed}"
                )
        shared = self.model_overrides.get(
            "share_embeddings", PRESETS[self.preset].get("share_embeddings", False)
        )
        if shared and not self.joint_vocabulary and self.init_from is None:
            raise ValueError(
                "The model shares its embeddings (`share_embeddings`), which needs one "
                "vocabulary for both languages: set `joint_vocabulary`"
            )
        if self.backend is not None and self.backend not in BACKENDS:
            raise ValueError(
                f"`backend` must be one of {BACKENDS}. Received: backend={self.backend!r}"
            )
        if self.backend not in (None, "tensorflow") and self.strategy != "auto":
            raise ValueError(
                f"`strategy={self.strategy!r}` is a tf.distribute strategy and needs "
                f"backend='tensorflow'. Received: backend={self.backend!r}"
            )
        if self.batch_tokens < self.max_length:
            raise ValueError(
                f"`batch_tokens` ({self.batch_tokens}) must be at least "
                f"`max_length` ({self.max_length})"
            )

    @classmethod
    def from_dict(cls, values):
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"Unknown training config keys: {unknown}. Known keys: {sorted(known)}"
            )
        return cls(**values)

    def to_dict(self):
        return dataclasses.asdict(self)


def read_config_file(path):
    """Reads a YAML or JSON file of `TrainConfig` keys into a dict."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"Config file not found: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if path.endswith((".yaml", ".yml")):
            yaml = require("yaml")
            try:
                values = yaml.safe_load(text) or {}
            except yaml.YAMLError as error:  # its message marks the place over lines
                mark = getattr(error, "problem_mark", None)
                where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
                problem = getattr(error, "problem", None) or " ".join(str(error).split())
                raise ValueError(f"not YAML: {problem}{where}") from None
        else:
            values = json.loads(text)
    except ValueError as error:  # not UTF-8, YAML or JSON
        raise ValueError(f"Config file {path} cannot be read: {error}") from None
    if not isinstance(values, dict):
        raise ValueError(f"Config file {path} must hold a mapping of keys to values")
    return {k.replace("-", "_"): v for k, v in values.items()}
