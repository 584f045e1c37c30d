"""The default search space, which of its dimensions are whose, and what a
dimension may be.

Plain data: the command line reads it without loading keras-tuner.

A dimension is one of:
- a value: fixed (`hp.Fixed`);
- a list: the choices (`hp.Choice`; `[False, True]` is `hp.Boolean`);
- a range, `{"min": 0.0, "max": 0.3, "step": 0.05}`: `hp.Int` when `min`
  and `max` (and `step`) are integers, else `hp.Float`; `"sampling"` is
  keras-tuner's `"linear"` (default), `"log"` or `"reverse_log"`;
- `None`, for `attention_dropout` and `num_decoder_layers` alone: not
  searched, the `Transformer`'s default (the `dropout`, the `num_layers`
  of the trial).
"""

DEFAULT_SPACE = {
    "num_layers": [1, 2, 3, 4, 6],
    "num_decoder_layers": None,
    "d_model": [128, 256, 512],
    "num_heads": [1, 2, 4, 8],
    "dff": [256, 512, 1024, 2048],
    "dropout": [0.0, 0.1, 0.2, 0.3],
    "attention_dropout": None,
    "norm_first": [False, True],
    "share_embeddings": False,
    "warmup_steps": [500, 1000, 2000, 4000],
    "lr_scale": 1.0,
    "label_smoothing": [0.0, 0.1, 0.2],
    "batch_tokens": [1024, 2048, 4096],
    "batch_size": [16, 32, 64],
}
# Dimensions of `fit`, not of the model: token budgets for datasets,
# sentences for arrays.
BATCH_DIMENSIONS = ("batch_tokens", "batch_size")
# The dimensions that are `Transformer` arguments (the rest are the
# recipe's or `fit`'s); `search.train_best` passes the same ones on.
MODEL_DIMENSIONS = (
    "num_layers",
    "num_decoder_layers",
    "d_model",
    "num_heads",
    "dff",
    "dropout",
    "attention_dropout",
    "norm_first",
    "share_embeddings",
)
# Dimensions that may be left to the model's default.
OPTIONAL_DIMENSIONS = ("num_decoder_layers", "attention_dropout")
# Dimensions that take whole numbers, and booleans.
INTEGER_DIMENSIONS = (
    "num_layers",
    "num_decoder_layers",
    "d_model",
    "num_heads",
    "dff",
    "warmup_steps",
    "batch_tokens",
    "batch_size",
)
BOOLEAN_DIMENSIONS = ("norm_first", "share_embeddings")
SAMPLINGS = ("linear", "log", "reverse_log")
_RANGE_KEYS = {"min", "max", "step", "sampling"}


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_dimension(name, value):
    """Checks one dimension of a space (see the module's docstring).

    Returns:
        `value`, a list for a tuple.

    Raises:
        ValueError: naming the dimension and what is wrong with it.
    """
    if name not in DEFAULT_SPACE:
        raise ValueError(f"Unknown search dimension {name!r}; known: {sorted(DEFAULT_SPACE)}")
    if value is None:
        if name not in OPTIONAL_DIMENSIONS:
            raise ValueError(
                f"Search dimension {name!r} cannot be None (only "
                f"{', '.join(OPTIONAL_DIMENSIONS)} can: the model's default)"
            )
        return None
    if isinstance(value, dict):
        return _check_range(name, value)
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"Search dimension {name!r} has no values")
    for v in values:
        if name in BOOLEAN_DIMENSIONS:
            ok = isinstance(v, bool)
        elif name in INTEGER_DIMENSIONS:
            ok = isinstance(v, int) and not isinstance(v, bool) and v > 0
        else:
            ok = _is_number(v) and v >= 0
        if not ok:
            kind = (
                "booleans"
                if name in BOOLEAN_DIMENSIONS
                else "positive integers"
                if name in INTEGER_DIMENSIONS
                else "non-negative numbers"
            )
            raise ValueError(f"Search dimension {name!r} takes {kind}. Received: {value!r}")
    return values if isinstance(value, (list, tuple)) else value


def _check_range(name, spec):
    unknown = sorted(set(spec) - _RANGE_KEYS)
    if unknown or not {"min", "max"} <= set(spec):
        raise ValueError(
            f"Search dimension {name!r}: a range is {{'min': ..., 'max': ..., 'step': ..., "
            f"'sampling': ...}} (step and sampling optional). Received: {spec!r}"
        )
    if name in BOOLEAN_DIMENSIONS:
        raise ValueError(f"Search dimension {name!r} is a boolean: give [False, True], not a range")
    low, high, step = spec["min"], spec["max"], spec.get("step")
    if not all(_is_number(v) for v in (low, high)) or (step is not None and not _is_number(step)):
        raise ValueError(f"Search dimension {name!r}: min, max and step must be numbers: {spec!r}")
    if not low < high or (step is not None and step <= 0):
        raise ValueError(
            f"Search dimension {name!r}: a range needs min < max and a positive step. "
            f"Received: {spec!r}"
        )
    integer = is_integer_range(spec)
    if name in INTEGER_DIMENSIONS and not integer:
        raise ValueError(
            f"Search dimension {name!r} takes integers: min, max and step must be ints: {spec!r}"
        )
    if low < 0 or (name in INTEGER_DIMENSIONS and low < 1):
        raise ValueError(f"Search dimension {name!r}: min is out of range: {spec!r}")
    sampling = spec.get("sampling", "linear")
    if sampling not in SAMPLINGS:
        raise ValueError(
            f"Search dimension {name!r}: sampling must be one of {', '.join(SAMPLINGS)}. "
            f"Received: sampling={sampling!r}"
        )
    if sampling != "linear" and low <= 0:
        raise ValueError(f"Search dimension {name!r}: {sampling} sampling needs min > 0: {spec!r}")
    return dict(spec)


def is_integer_range(spec):
    """Whether a range is `hp.Int`'s (every bound an int) rather than `hp.Float`'s."""
    return all(
        isinstance(spec[key], int) and not isinstance(spec[key], bool)
        for key in ("min", "max", "step")
        if spec.get(key) is not None
    )


def dimension_values(spec):
    """Every value a dimension can take, for an Int range or a list
    (`None` for a Float range, which has no list), as keras-tuner steps
    through it: `step` added, or multiplied under log sampling."""
    if not isinstance(spec, dict):
        return list(spec) if isinstance(spec, (list, tuple)) else [spec]
    if not is_integer_range(spec):
        return None
    low, high, step = spec["min"], spec["max"], spec.get("step")
    if spec.get("sampling", "linear") != "linear" and step is not None:
        values, v = [], low
        while v <= high:
            values.append(v)
            v *= step
            if step == 1:
                break
        return values
    return list(range(low, high + 1, step or 1))
