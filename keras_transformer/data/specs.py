"""Dataset specs (`synthetic`, `parallel:SRC,TGT`, `tfds:NAME`), parsed
without TensorFlow, so that configs check them before anything loads."""

SYNTHETIC = "synthetic"


def parse_spec(spec):
    """Splits a dataset spec into `(kind, argument)`.

    `"synthetic"` -> `("synthetic", None)`; `"parallel:a.en,a.de"` ->
    `("parallel", ("a.en", "a.de"))`; `"tfds:wmt14_translate/de-en"` ->
    `("tfds", "wmt14_translate/de-en")`.
    """
    if spec == SYNTHETIC:
        return SYNTHETIC, None
    kind, _, argument = spec.partition(":")
    if kind == "parallel":
        files = [p for p in argument.split(",") if p]
        if len(files) != 2:
            raise ValueError(
                f"A parallel dataset is `parallel:SOURCE_FILE,TARGET_FILE`. Received: {spec!r}"
            )
        return kind, tuple(files)
    if kind == "tfds" and argument:
        return kind, argument
    raise ValueError(
        "Unknown dataset; use `synthetic`, `parallel:SRC_FILE,TGT_FILE` or "
        f"`tfds:NAME`. Received: {spec!r}"
    )


def default_validation_spec(spec):
    """The validation split that goes with `spec`, or None for files."""
    kind, _ = parse_spec(spec)
    return None if kind == "parallel" else (spec, "validation")
