"""Fresh Python processes that run this checkout.

Some things only a new process shows: what an import does to the
environment and to standard error, a command line's exit status and its
one-line error, a server's start and stop. Each helper puts the repository
on `PYTHONPATH` and unbuffers output, so that a line a child prints is read
as soon as it is printed.
"""

import os
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def environment(env=None, unset=()):
    """This process's environment for a child: `unset` names removed,
    then the repository's path and `env` added."""
    kept = {k: v for k, v in os.environ.items() if k not in unset}
    return {**kept, "PYTHONPATH": REPO, "PYTHONUNBUFFERED": "1", **(env or {})}


def run_python(*args, env=None, unset=(), timeout=300, **kwargs):
    """Runs `python ARGS` to its end; stdout and stderr come back as text."""
    return subprocess.run(
        [sys.executable, *args],
        env=environment(env, unset),
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def start_python(*args, env=None, unset=(), **kwargs):
    """Starts `python ARGS`; its stdout and stderr are one text pipe."""
    return subprocess.Popen(
        [sys.executable, *args],
        env=environment(env, unset),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def free_port():
    """A loopback TCP port that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_until(process, prefix, name, timeout=300):
    """Reads the output of `process` (a `start_python` child) up to a line
    starting with `prefix`; returns what it printed before. A child that
    ends or takes `timeout` s first is killed, and the error shows the last
    lines it printed under `name`."""
    deadline = time.monotonic() + timeout
    seen = []
    for line in process.stdout:
        if line.startswith(prefix):
            return "".join(seen)
        seen.append(line)
        if time.monotonic() > deadline:
            break
    process.kill()
    raise AssertionError(f"{name} did not print {prefix}:\n" + "".join(seen[-30:]))


def start_serve(base, *flags, timeout=300):
    """Starts `keras-transformer serve` for the model `translator` at the
    base path `base` on a free port, with `flags`; returns `(process, port)`
    once it printed READY, with what it printed before in the process's
    `startup_output`. Stop it with `terminate` or `kill`."""
    port = free_port()
    server = start_python(
        "-m", "keras_transformer.cli", "serve", "--model-base-path", base,
        "--model-name", "translator", "--port", str(port), *flags,
    )  # fmt: skip
    server.startup_output = read_until(server, "READY", "keras-transformer serve", timeout)
    return server, port
