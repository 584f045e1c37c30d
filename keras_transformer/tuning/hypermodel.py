"""A keras-tuner HyperModel over the Transformer and its training recipe."""

import keras_tuner

from keras_transformer.models.transformer import Transformer, check_vocab_sizes
from keras_transformer.training.recipe import compile_for_training
from keras_transformer.tuning.space import (
    BATCH_DIMENSIONS,
    BOOLEAN_DIMENSIONS,
    DEFAULT_SPACE,
    MODEL_DIMENSIONS,
    check_dimension,
    dimension_values,
    is_integer_range,
)


class TransformerHyperModel(keras_tuner.HyperModel):
    """Searches the architecture and training recipe of a `Transformer`.

    The space covers `num_layers`, `num_decoder_layers` (default: as
    `num_layers`), `d_model`, `num_heads`, `dff`, `dropout`,
    `attention_dropout` (default: as `dropout`), `norm_first`,
    `share_embeddings`, the schedule's `warmup_steps` and `lr_scale` (a
    scale on its peak, the paper's `d_model ** -0.5 * warmup_steps ** -0.5`),
    `label_smoothing`, and the batches of `fit`: `batch_tokens` (the token
    budget of the training pipeline's length-bucketed batches) for a
    dataset of unbatched examples, `batch_size` for arrays. Each keyword
    override replaces one dimension: a value fixes it, a list gives its
    choices, and a range `{"min": ..., "max": ..., "step": ..., "sampling":
    "log"}` is an `hp.Int` (integer bounds) or an `hp.Float`
    (`tuning.space` says what each dimension takes). `num_heads` only
    offers values that divide every `d_model` the space holds, so every
    sampled model is valid. Passing a `keras_tuner.HyperParameters` with
    some values declared (or fixed) takes precedence over the defaults.

    To search dimensions of your own as well, wrap `build` in your own
    `build_model(hp)` (or subclass and call `super().build(hp)`): the
    dimensions declared here and yours share one `hp`.

    Args:
        source_vocab_size: source vocabulary size.
        target_vocab_size: target vocabulary size.
        max_length: longest sequence of the models.
        objective_callbacks: callbacks added to every `fit` (e.g. BLEU).
        jit_compile: compile each trial's train step with XLA (as
            `TrainConfig.jit_compile`; off by default: a trial runs few
            steps, and XLA's compile time is paid per trial).
        **overrides: search-space dimensions, see above.

    Example:

    >>> hypermodel = TransformerHyperModel(
    ...     8000, 8000, num_layers=[1, 2], d_model=128,
    ...     dropout={"min": 0.0, "max": 0.3, "step": 0.1},
    ... )
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
        check_vocab_sizes(source_vocab_size, target_vocab_size)
        self.source_vocab_size = source_vocab_size
        self.target_vocab_size = target_vocab_size
        self.max_length = max_length
        self.objective_callbacks = list(objective_callbacks)
        self.jit_compile = bool(jit_compile)
        for key in sorted(set(overrides) - set(DEFAULT_SPACE)):
            check_dimension(key, overrides[key])  # names the unknown dimension
        self.space = {
            key: check_dimension(key, overrides.get(key, default))
            for key, default in DEFAULT_SPACE.items()
        }
        # An integer dimension: a list, or an Int range's values.
        d_models = dimension_values(self.space["d_model"])
        heads = [
            h
            for h in dimension_values(self.space["num_heads"])
            if all(d % h == 0 for d in d_models)
        ]
        if not heads:
            raise ValueError(
                f"No num_heads in {self.space['num_heads']} divides every d_model in {d_models}"
            )
        self.space["num_heads"] = heads
        if True in dimension_values(self.space["share_embeddings"]) and (
            source_vocab_size != target_vocab_size
        ):
            raise ValueError(
                "share_embeddings needs one vocabulary for both sides; received "
                f"source_vocab_size={source_vocab_size}, target_vocab_size={target_vocab_size}"
            )

    def _choice(self, hp, name):
        """Declares dimension `name` in `hp` and returns its value (None for
        a dimension left to the model's default)."""
        spec = self.space[name]
        if spec is None:
            return None
        if isinstance(spec, dict):
            kind = hp.Int if is_integer_range(spec) else hp.Float
            return kind(
                name,
                min_value=spec["min"],
                max_value=spec["max"],
                step=spec.get("step"),
                sampling=spec.get("sampling", "linear"),
            )
        values = spec if isinstance(spec, list) else [spec]
        if len(values) == 1:
            return hp.Fixed(name, values[0])
        if set(values) == {False, True}:
            return hp.Boolean(name)
        return hp.Choice(name, values)

    def build(self, hp):
        config = {
            name: self._choice(hp, name) for name in DEFAULT_SPACE if name not in BATCH_DIMENSIONS
        }
        for name in BOOLEAN_DIMENSIONS:  # keras-tuner may hand back NumPy's
            config[name] = bool(config[name])
        if config["d_model"] % config["num_heads"]:
            raise ValueError(
                f"num_heads={config['num_heads']} does not divide d_model={config['d_model']}"
            )
        model = Transformer(
            **{name: config[name] for name in MODEL_DIMENSIONS},
            source_vocab_size=self.source_vocab_size,
            target_vocab_size=self.target_vocab_size,
            max_length=self.max_length,
        )
        model.build(((None, None), (None, None)))
        return compile_for_training(
            model,
            warmup_steps=config["warmup_steps"],
            lr_scale=config["lr_scale"],
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
