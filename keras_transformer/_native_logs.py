"""Applies `TF_CPP_MIN_LOG_LEVEL` to what TensorFlow's C++ logs at import.

TensorFlow's native libraries log a few INFO records while they load
(oneDNN on, no CUDA driver, CPU features), before their logging is
initialized, and at that point they ignore `TF_CPP_MIN_LOG_LEVEL`: every
`import keras` on the TensorFlow backend prints them to standard error,
including in front of a command line tool's one-line error message.
`filtered()` holds back the records below the requested level; Python's
own writes to `sys.stderr` meanwhile go through unchanged. The command
line uses it; importing the library does not.
"""

import contextlib
import os
import re
import subprocess
import sys

# absl's note that it is not yet initialized, printed once per library.
_NOT_INITIALIZED = "WARNING: All log messages before absl::InitializeLog() is called"
_RECORD = re.compile(r"^([IWEF])\d{4} ")
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}
# TensorFlow's own default for an unset TF_CPP_MIN_LOG_LEVEL is 0 (all).
# At import it has nothing to say at INFO level that a user can act on.
_DEFAULT_LEVEL = 1


def min_level(environ=None):
    """The severity (0 INFO ... 3 FATAL) below which records are dropped."""
    value = (os.environ if environ is None else environ).get("TF_CPP_MIN_LOG_LEVEL", "")
    try:
        return int(value)
    except ValueError:
        return _DEFAULT_LEVEL


def keep(text, level):
    """The lines of `text` that survive `level`.

    A record starts with a severity letter and a date (`I0000 ...`); the
    lines that follow it without such a prefix continue it. Lines before
    any record are always kept.
    """
    keeps = _LineFilter(level)
    return "".join(line for line in text.splitlines(keepends=True) if keeps(line))


class _Bypass:
    """`sys.stderr` while descriptor 2 is captured.

    Writes go to a duplicate of the real descriptor 2 until `release()`,
    then to the stream it stands for. Python's own writes thus skip the
    capture, and a stream that a logging handler keeps from this time
    (TensorFlow's and absl's create theirs at import) stays usable.
    """

    def __init__(self, stream, fd):
        self._stream, self._fd = stream, fd

    def write(self, text):
        if self._fd is None:
            return self._stream.write(text)
        encoding = getattr(self._stream, "encoding", None) or "utf-8"
        os.write(self._fd, text.encode(encoding, "backslashreplace"))
        return len(text)

    def flush(self):
        if self._fd is None:
            self._stream.flush()

    def release(self):
        self._fd = None

    def close(self):
        # A handler that took this stream at import (absl's) closes it at
        # logging.shutdown(): the real standard error must stay open.
        self.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _LineFilter:
    """`keep`, a line at a time: whether each line survives `level`."""

    def __init__(self, level):
        self.level, self.keeping = level, True

    def __call__(self, line):
        if line.startswith(_NOT_INITIALIZED):
            self.keeping = self.level <= 0
        else:
            record = _RECORD.match(line)
            if record:
                self.keeping = _SEVERITY[record.group(1)] >= self.level
        return self.keeping


def forward(level):
    """Copies standard input to standard output as it comes, a line at a
    time, less the records below `level`: the filter process of `filtered`."""
    keeps = _LineFilter(level)
    for raw in sys.stdin.buffer:
        if keeps(raw.decode("utf-8", "replace")):
            sys.stdout.buffer.write(raw)
            sys.stdout.buffer.flush()


# The filter process: this module run by path, so that it loads nothing else.
_FORWARDER = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('native_logs', sys.argv[1])\n"
    "module = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(module)\n"
    "module.forward(int(sys.argv[2]))\n"
)


@contextlib.contextmanager
def filtered():
    """Runs the body with file descriptor 2 piped through a filter process
    that forwards, as they come, the lines `keep` keeps. A program calls it
    around the import that loads TensorFlow (the command line does); the
    library never does.

    The filter is a process of its own so that nothing is lost if the body
    aborts the program (a FATAL record of a native library): the filter
    still reads what was written and forwards it. Python's own writes to
    `sys.stderr` go straight to the real standard error. Does nothing once
    TensorFlow is loaded, or when standard error has no file descriptor.
    """
    if "tensorflow" in sys.modules:
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (AttributeError, OSError, ValueError):
        yield
        return
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", _FORWARDER, os.path.abspath(__file__), str(min_level())],
            stdin=subprocess.PIPE,
            stdout=saved,
            stderr=saved,
        )
    except OSError:
        os.close(saved)
        yield
        return
    python_stderr, bypass = sys.stderr, None
    if python_stderr is sys.__stderr__ and _fileno(python_stderr) == 2:
        # A replaced `sys.stderr` (a notebook's, a test runner's) does not
        # write to descriptor 2 and needs nothing.
        bypass = sys.stderr = _Bypass(python_stderr, saved)
    os.dup2(child.stdin.fileno(), 2)
    try:
        yield
    finally:
        if bypass is not None:
            bypass.release()
            if sys.stderr is bypass:
                sys.stderr = python_stderr
        os.dup2(saved, 2)
        child.stdin.close()  # the filter reads to the end, then exits
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
        os.close(saved)


def _fileno(stream):
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None
