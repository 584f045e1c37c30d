"""The benchmarks a user runs: each says how to run it.

`benchmarks/` keeps the benchmarks of the library's products (training
throughput, decode latency and its floor, the peers (on OPUS-MT's shape too), load time, the
serving soak, corpus throughput, the Multi30k recipe); studies live in dated notes under
`docs/notes/`. Each script's `--help` runs here, so that a library change
that breaks a script's imports or flags shows in the suite.
"""

import os

import pytest

from tests.processes import REPO, run_python

BENCHMARKS = os.path.join(REPO, "benchmarks")
# Helpers of the decode scripts, not benchmarks.
HELPERS = ("multi30k_data.py", "small_model.py")
SCRIPTS = sorted(
    name for name in os.listdir(BENCHMARKS) if name.endswith(".py") and name not in HELPERS
)


def test_the_benchmarks_are_the_products():
    assert SCRIPTS == [
        "corpus.py", "decode_floor.py", "decode_jax.py", "decode_latency.py", "decode_peers.py",
        "jit_load.py", "marian_peers.py", "serve_load.py", "train_throughput.py",
    ]  # fmt: skip


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_says_how_to_run_it(script):
    result = run_python(os.path.join(BENCHMARKS, script), "--help", cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage:") and "--help" in result.stdout
