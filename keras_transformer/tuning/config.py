"""Search configuration: one set of keys for `tune`'s flags and `run_search`."""

import dataclasses

from keras_transformer._validation import check_positive_int
from keras_transformer.data.config import DataConfig
from keras_transformer.tuning.space import DEFAULT_SPACE, check_dimension, dimension_values

TUNERS = ("random", "hyperband", "bayesian")
# Objectives and whether larger is better.
OBJECTIVES = {
    "val_masked_accuracy": "max",
    "val_loss": "min",
    "val_bleu": "max",
    "masked_accuracy": "max",
    "loss": "min",
}


@dataclasses.dataclass(kw_only=True)
class TuneConfig(DataConfig):
    """Everything `tune` needs.

    The data and vocabulary keys are `DataConfig`'s, shared with `train`;
    here `dataset` is required, and the search needs validation data.

    Attributes:
        directory: where the search keeps its trials, tokenizers and
            results; a search started again here resumes.
        tuner: keras-tuner's search algorithm.
        max_trials: how many hyperparameter sets are tried (Hyperband
            decides its own count from `epochs`).
        epochs: epochs of each trial.
        steps_per_epoch: batches per epoch (the data repeats); None for
            full passes over the training data.
        objective: the metric the search maximizes (accuracies, BLEU) or
            minimizes (losses).
        space: JSON dict of search-space overrides, e.g. `{"d_model": [64,
            128], "dropout": {"min": 0.0, "max": 0.3, "step": 0.05}}`: a
            list gives the choices, a value fixes the dimension, a range
            (min, max, optional step and sampling: linear, log or
            reverse_log) is an Int or Float. Dimensions: num_layers,
            num_decoder_layers, d_model, num_heads, dff, dropout,
            attention_dropout, norm_first, share_embeddings, warmup_steps,
            lr_scale, label_smoothing and batch_tokens (their defaults:
            `keras_transformer.tuning.space.DEFAULT_SPACE`).
        bleu_sentences: validation sentences translated for `val_bleu`.
        train_best: after the search, train the best configuration into
            `DIRECTORY/best_run` (a run `evaluate` and `export` accept).
        best_epochs: epochs of that training; None for `epochs`.
        jit_compile: compile each trial's train step with XLA.
        seed: random seed of the search and of the data order.
        verbose: Keras progress output of each trial: 0 none, 1 a line of
            steps as they run, 2 one line per epoch.
    """

    dataset: str = dataclasses.field()
    directory: str
    tuner: str = dataclasses.field(default="random", metadata={"choices": TUNERS})
    max_trials: int = 10
    epochs: int = 2
    steps_per_epoch: int | None = None
    objective: str = dataclasses.field(
        default="val_masked_accuracy", metadata={"choices": tuple(OBJECTIVES)}
    )
    space: dict = dataclasses.field(default_factory=dict)
    bleu_sentences: int = 200
    train_best: bool = False
    best_epochs: int | None = None
    jit_compile: bool = False
    seed: int = 0
    verbose: int = dataclasses.field(default=1, metadata={"choices": (0, 1, 2)})

    def validate(self):
        super().validate()
        if not isinstance(self.directory, str) or not self.directory:
            raise ValueError(f"`directory` is required. Received: directory={self.directory!r}")
        if self.validation_spec() is None:
            raise ValueError(
                "Tuning needs validation data: give `valid` (`--valid`) for parallel files"
            )
        if self.tuner not in TUNERS:
            raise ValueError(f"`tuner` must be one of {TUNERS}. Received: tuner={self.tuner!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(
                f"`objective` must be one of {tuple(OBJECTIVES)}. "
                f"Received: objective={self.objective!r}"
            )
        for name in ("max_trials", "epochs"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("bleu_sentences", self.bleu_sentences)
        for name in ("steps_per_epoch", "best_epochs"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        if self.verbose not in (0, 1, 2):
            raise ValueError(f"`verbose` must be 0, 1 or 2. Received: verbose={self.verbose!r}")
        if not isinstance(self.space, dict):
            raise ValueError(f"`space` must be a dict. Received: space={self.space!r}")
        self.space = {name: check_dimension(name, value) for name, value in self.space.items()}
        if "batch_size" in self.space:
            # Trials get the training pipeline's token-budget batches.
            raise ValueError(
                "The search batches by tokens: give `batch_tokens` in the space "
                "instead of `batch_size` (which applies to array inputs of "
                "`TransformerHyperModel.fit`)"
            )
        budgets = dimension_values(self.space.get("batch_tokens", DEFAULT_SPACE["batch_tokens"]))
        if min(budgets) < self.max_length:
            raise ValueError(
                f"Every `batch_tokens` of the space must be an int of at least "
                f"max_length={self.max_length}. Received: {budgets}"
            )

    @classmethod
    def from_dict(cls, values):
        """A `TuneConfig` from a dict of its keys; unknown or missing keys are named."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ValueError(f"Unknown tune config keys: {unknown}. Known keys: {sorted(fields)}")
        missing = [
            name
            for name, f in fields.items()
            if f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
            and values.get(name) is None
        ]
        if missing:
            raise ValueError(f"Missing tune config keys: {missing}")
        return cls(**values)

    def to_dict(self):
        return dataclasses.asdict(self)
