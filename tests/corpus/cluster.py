"""A real Ray cluster of this machine on loopback, for the tests and the
corpus benchmark.

Ray rewrites 127.0.0.1 and `localhost` to the machine's network address:
its nodes here bind 127.0.0.2, 127.0.0.3, ... explicitly, so that the
cluster stays on this machine.
"""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile

from tests.processes import environment, free_port


def _ray(*args, home=None, timeout=120):
    command = [os.path.join(os.path.dirname(sys.executable), "ray"), *args]
    # Ray 2.60 turns token authentication on for a head node when a token
    # is saved (~/.ray/auth_token, written by any local ray.init(), as the
    # corpus job without --ray-address runs), but not for the nodes that
    # join it, which are then refused: the mode is set, for every node.
    mode = os.environ.get("RAY_AUTH_MODE", "disabled")
    env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": mode}
    env.update({"HOME": home} if home else {})
    return subprocess.run(command, env=environment(env), capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def _stop(temp, address, grace=10):
    """Stops this cluster's processes, not the machine's other Ray
    clusters (as `ray stop --force` would): those whose command line names
    its temporary folder or its head's address, with their descendants
    (Ray's agents and workers rename themselves); SIGTERM, then SIGKILL
    for those still there after `grace` seconds."""
    import psutil

    needles = (temp, f"--address={address}", f"--gcs-address={address}")
    found = {}
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or ())
        if any(needle in line for needle in needles):
            found[process.pid] = process
            with contextlib.suppress(psutil.Error):
                found.update((child.pid, child) for child in process.children(recursive=True))
    found.pop(os.getpid(), None)
    for process in found.values():
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(list(found.values()), timeout=grace)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=grace)


@contextlib.contextmanager
def loopback_cluster(nodes=2, cpus=1, home=None):
    """Starts a head node at 127.0.0.2 and `nodes - 1` more at 127.0.0.3,
    ..., each of `cpus` CPUs; yields the head's `HOST:PORT`; stops the
    cluster's processes on leaving, whatever happened (`_stop`). `home`:
    their HOME (where Ray looks for a saved token), or this process's."""
    port = free_port()  # above Ray's worker port range (10002-19999)
    # Ray's sockets live under its temporary folder, and a socket's path
    # holds at most 107 bytes: a pytest folder is too deep for it.
    temp = tempfile.mkdtemp(prefix="kt-ray-", dir="/tmp")
    head = ["start", "--head", "--node-ip-address=127.0.0.2", f"--port={port}",
            f"--num-cpus={cpus}", "--include-dashboard=false", f"--temp-dir={temp}"]  # fmt: skip
    try:
        started = _ray(*head, home=home)
        if started.returncode != 0:
            raise RuntimeError(f"ray start --head failed: {started.stderr[-2000:]}")
        for node in range(1, nodes):
            address = f"--node-ip-address=127.0.0.{2 + node}"
            joined = _ray("start", f"--address=127.0.0.2:{port}", address, f"--num-cpus={cpus}",
                          home=home)  # fmt: skip
            if joined.returncode != 0:
                raise RuntimeError(f"ray start (node {node + 1}) failed: {joined.stderr[-2000:]}")
        yield f"127.0.0.2:{port}"
    finally:
        _stop(temp, f"127.0.0.2:{port}")
        shutil.rmtree(temp, ignore_errors=True)
