"""The benchmarks a user runs: each says how to run it.

`benchmarks/` keeps the benchmarks of the library's products (training
throughput, decode latency and its floor, the peers (on OPUS-MT's shape
too), fused attention, load time, the serving soak, corpus throughput, the
Multi30k recipe); studies live in dated notes under
`docs/notes/`. Each script's `--help` runs here, so that a library change
that breaks a script's imports or flags shows in the suite.
"""

import json
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
        "fused_attention.py", "jit_load.py", "marian_peers.py", "serve_load.py",
        "train_throughput.py",
    ]  # fmt: skip


# One child runs every script's `--help` as `python SCRIPT --help` would
# (as `__main__`, its folder first on the path): one TensorFlow import, not
# one a script.
HELP_ALL = """
import contextlib, io, json, os, runpy, sys, traceback
folder, names = sys.argv[1], sys.argv[2:]
sys.path.insert(0, folder)
results = {}
for name in names:
    out = io.StringIO()
    sys.argv = [os.path.join(folder, name), "--help"]
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(sys.argv[0], run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code or 0
    except BaseException:
        code, out = 1, io.StringIO(traceback.format_exc())
    results[name] = [code, out.getvalue()]
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def helps():
    result = run_python("-c", HELP_ALL, BENCHMARKS, *SCRIPTS, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_says_how_to_run_it(script, helps):
    code, out = helps[script]
    assert code == 0, out[-2000:]
    assert out.startswith("usage:") and "--help" in out
