import os
import socket
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TINY = [
    "--preset",
    "tiny",
    "--model-overrides",
    '{"num_layers": 1, "d_model": 32, "num_heads": 2, "dff": 64, "dropout_rate": 0.0}',
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
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": REPO, **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "keras_transformer.cli", *args],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
