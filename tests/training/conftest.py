from tests.processes import start_python

TINY = [
    "--preset",
    "tiny",
    "--model-overrides",
    '{"num_layers": 1, "d_model": 32, "num_heads": 2, "dff": 64, "dropout": 0.0}',
    "--vocab-size",
    "120",
    "--batch-tokens",
    "512",
    "--max-length",
    "64",
    "--warmup-steps",
    "20",
    "--lr-scale",
    "2.0",
    "--verbose",
    "2",
]


def cli(*args, env=None, **kwargs):
    """Runs `keras-transformer ARGS` in a fresh process."""
    return start_python("-m", "keras_transformer.cli", *args, env=env, **kwargs)
