"""A keras-tuner HyperModel over the Transformer and its training recipe."""

import keras_tuner

from keras_transformer import _renames
from keras_transformer.models.transformer import Transformer, check_vocab_sizes
from keras_transformer.training.recipe import compile_for_training
from keras_transformer.tuning.space import (
    BATCH_DIMENSIONS,
    DEFAULT_SPACE,
    MODEL_DIMENSIONS,
    RENAMED_DIMENSIONS,
)


class TransformerHyperModel(keras_tuner.HyperModel):
    """Searches the architecture and training recipe of a `Transformer`.

    The space covers `num_layers`, `d_model`, `num_heads`, `dff`,
    `dropout` (formerly `dropout_rate`), `norm_first`, the schedule's `warmup_steps`,
    `label_smoothing`, and the batches of `fit`: `batch_tokens` (the token
    budget of the training pipeline's length-bucketed batches) for a
    dataset of unbatched examples, `batch_size` for arrays. Each keyword override
    narrows or widens one dimension: a list gives the choices, a single
    value fixes it. `num_heads` only offers values that divide every
    `d_model` choice, so every sampled model is valid. Passing a
    `keras_tuner.HyperParameters` with some values declared (or fixed) takes
    precedence over the defaults.

    Args:
        source_vocab_size: source vocabulary size (formerly
            `input_vocab_size`).
        target_vocab_size: target vocabulary size.
        max_length: longest sequence of the models.
        objective_callbacks: callbacks added to every `fit` (e.g. BLEU).
        jit_compile: compile each trial's train step with XLA (as
            `TrainConfig.jit_compile`; off by default: a trial runs few
            steps, and XLA's compile time is paid per trial).
        **overrides: search-space dimensions, see above.

    Example:

    >>> hypermodel = TransformerHyperModel(8000, 8000, num_layers=[1, 2], d_model=128)
    >>> objective = keras_tuner.Objective("val_masked_accuracy", "max")
    >>> tuner = keras_tuner.RandomSearch(
    ...     hypermodel, objective, max_trials=4, directory=tmp_dir, project_name="doc"
    ... )
    >>> tuner.search_space_summary()  # doctest: +ELLIPSIS
    Search space summary
    ...
    """

    def __init__(
        self,
        source_vocab_size=None,
        target_vocab_size=None,
        max_length=256,
        objective_callbacks=(),
        jit_compile=False,
        **overrides,
    ):
        super().__init__(name="transformer", tunable=True)
        # Both names with different values are refused, as by `Transformer`.
        renamed = _renames.pop_renamed(
            overrides, {"input_vocab_size": "source_vocab_size"}, "TransformerHyperModel"
        )
        source_vocab_size = _renames.resolve("source_vocab_size", source_vocab_size, None, renamed)
        _renames.rename_keys(overrides, RENAMED_DIMENSIONS, "TransformerHyperModel")
        check_vocab_sizes(source_vocab_size, target_vocab_size)
        unknown = sorted(set(overrides) - set(DEFAULT_SPACE))
        if unknown:
            raise ValueError(f"Unknown search dimensions {unknown}; known: {sorted(DEFAULT_SPACE)}")
        self.source_vocab_size = source_vocab_size
        self.target_vocab_size = target_vocab_size
        self.max_length = max_length
        self.objective_callbacks = list(objective_callbacks)
        self.jit_compile = bool(jit_compile)
        self.space = {}
        for key, default in DEFAULT_SPACE.items():
            value = overrides.get(key, default)
            self.space[key] = list(value) if isinstance(value, (list, tuple)) else [value]
            if not self.space[key]:
                raise ValueError(f"Search dimension {key!r} has no values")
        d_models = self.space["d_model"]
        heads = [h for h in self.space["num_heads"] if all(d % h == 0 for d in d_models)]
        if not heads:
            raise ValueError(
                f"No num_heads in {self.space['num_heads']} divides every d_model in {d_models}"
            )
        self.space["num_heads"] = heads

    def _choice(self, hp, name):
        values = self.space[name]
        if len(values) == 1:
            return hp.Fixed(name, values[0])
        if set(values) == {False, True}:
            return hp.Boolean(name)
        return hp.Choice(name, values)

    def build(self, hp):
        config = {
            name: self._choice(hp, name) for name in DEFAULT_SPACE if name not in BATCH_DIMENSIONS
        }
        if config["d_model"] % config["num_heads"]:
            raise ValueError(
                f"num_heads={config['num_heads']} does not divide d_model={config['d_model']}"
            )
        model = Transformer(
            **{name: config[name] for name in MODEL_DIMENSIONS if name != "norm_first"},
            norm_first=bool(config["norm_first"]),
            source_vocab_size=self.source_vocab_size,
            target_vocab_size=self.target_vocab_size,
            max_length=self.max_length,
        )
        model.build(((None, None), (None, None)))
        return compile_for_training(
            model,
            warmup_steps=config["warmup_steps"],
            label_smoothing=config["label_smoothing"],
            jit_compile=self.jit_compile,
        )

    def fit(self, hp, model, *args, **kwargs):
        """Fits on batches of the sampled size.

        A dataset of unbatched `((context, target_in), target_out)` examples
        is batched as training batches it (`pipeline.batch_by_tokens`, with
        the sampled `batch_tokens`); arrays get the sampled `batch_size`; a
        dataset of batches is used as it is.
        """
        import tensorflow as tf

        from keras_transformer.data import pipeline

        x = args[0] if args else kwargs.pop("x")
        rest = args[1:]
        if isinstance(x, tf.data.Dataset):
            spec = tf.nest.flatten(x.element_spec)
            if all(s.shape.rank == 1 for s in spec):
                budget = self._choice(hp, "batch_tokens")
                flat = x.map(lambda inputs, labels: (*inputs, labels))
                # Examples are at most `max_length` long; a budget below it
                # still batches them, one a batch, in the last bucket.
                x = pipeline.batch_by_tokens(flat, budget, min(self.max_length, budget))
            # A dataset is shuffled by its pipeline; Keras would only warn.
            kwargs.setdefault("shuffle", False)
        else:
            kwargs["batch_size"] = self._choice(hp, "batch_size")
        callbacks = list(kwargs.pop("callbacks", [])) + self.objective_callbacks
        return model.fit(x, *rest, callbacks=callbacks, **kwargs)
