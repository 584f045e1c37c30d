"""TensorFlow's import-time native log records honour TF_CPP_MIN_LOG_LEVEL,
and a command line error is one line of standard error."""

import os

import pytest

from keras_transformer import _native_logs
from tests.processes import REPO, run_python

NOTE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
INFO = "I0000 00:00:1.0    7 cpu_feature_guard.cc:227] This binary is optimized.\n"
INFO_MORE = "To enable the following instructions: AVX2 FMA, rebuild.\n"
WARNING = "W0000 00:00:1.0    7 loader.cc:1] Could not load a plugin.\n"
ERROR = "E0000 00:00:1.0    7 loader.cc:2] Could not open a library.\n"
LOG = NOTE + INFO + INFO_MORE + WARNING + ERROR


@pytest.mark.parametrize(
    "level,expected",
    [
        (0, LOG),
        (1, WARNING + ERROR),
        (2, ERROR),
        (3, ""),
    ],
)
def test_records_below_the_level_are_dropped_with_their_continuations(level, expected):
    assert _native_logs.keep(LOG, level) == expected


def test_lines_before_any_record_are_kept():
    assert _native_logs.keep("plain text\n" + INFO, 1) == "plain text\n"


@pytest.mark.parametrize(
    "environ,level",
    [({}, 1), ({"TF_CPP_MIN_LOG_LEVEL": "3"}, 3), ({"TF_CPP_MIN_LOG_LEVEL": "x"}, 1)],
)
def test_min_level_reads_tf_cpp_min_log_level(environ, level):
    assert _native_logs.min_level(environ) == level


def _run(code, level):
    env = None if level is None else {"TF_CPP_MIN_LOG_LEVEL": level}
    return run_python("-c", code, env=env, unset=("TF_CPP_MIN_LOG_LEVEL",))


# Loads the module by path: importing the package would load TensorFlow,
# after which `filtered` has nothing left to filter.
_WRITES_THROUGH_FILTER = f"""
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location(
    "native_logs", {os.path.join(REPO, "keras_transformer", "_native_logs.py")!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
import logging
logger = logging.getLogger("kept")
with module.filtered():
    os.write(2, {(INFO + INFO_MORE + ERROR).encode()!r})  # as a native library does
    print("from Python", file=sys.stderr)
    logger.addHandler(logging.StreamHandler())  # keeps the sys.stderr of now
print("after", file=sys.stderr)
logger.warning("logged later")
"""


@pytest.mark.parametrize(
    "level,expected",
    [
        (None, "from Python\n" + ERROR + "after\nlogged later\n"),
        ("0", "from Python\n" + INFO + INFO_MORE + ERROR + "after\nlogged later\n"),
        ("3", "from Python\nafter\nlogged later\n"),
    ],
)
def test_filtered_holds_back_native_records_and_passes_python_writes(level, expected):
    result = _run(_WRITES_THROUGH_FILTER, level)
    assert result.returncode == 0, result.stderr
    # The filter forwards records as they come, beside Python's own writes:
    # within the body the order of the two is not fixed; after it, it is.
    inside, after = expected.split("after\n")
    assert sorted(result.stderr.split("after\n")[0].splitlines()) == sorted(inside.splitlines())
    assert result.stderr.endswith("after\n" + after)


def test_an_abort_inside_the_filter_loses_no_record():
    code = f"""
import importlib.util, os
spec = importlib.util.spec_from_file_location(
    "native_logs", {os.path.join(REPO, "keras_transformer", "_native_logs.py")!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
with module.filtered():
    os.write(2, b"I0000 00:00:1.0 1 a.cc:1] dropped\\nF0000 00:00:1.0 1 b.cc:2] fatal\\n")
    os.abort()  # as a native library's FATAL does
"""
    result = _run(code, None)
    assert result.returncode != 0
    assert "b.cc:2] fatal" in result.stderr and "dropped" not in result.stderr


def test_a_command_line_error_is_one_line_of_stderr(tmp_path):
    missing = str(tmp_path / "missing.en")
    argv = ["score", "--model", str(tmp_path), "--source", missing, "--target", missing]
    result = _run(
        f"import sys\nfrom keras_transformer import cli\nsys.exit(cli.main({argv!r}))", None
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"keras-transformer score: error: {missing}: corpus file not found"
    ]
