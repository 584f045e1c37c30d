"""The deployed path through the command line: export, serve, query, swap."""

import os
import subprocess
import sys
import time

from keras_transformer.serving.grpc_client import GrpcTranslationClient
from tests.training.conftest import REPO, free_port

SENTENCES = ["The dog sleeps.", "A young woman reads the book because the children laugh."]


def _cli(*args, **kwargs):
    env = {**os.environ, "PYTHONPATH": REPO, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "keras_transformer.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        **kwargs,
    )


def test_train_export_serve_query_and_swap(trained_run, tmp_path):
    base = str(tmp_path / "exports" / "translator")
    result = _cli(
        "export", "--run", trained_run["run"], "--export-base", base, "--max-length", "24"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith(os.path.join("translator", "1"))

    plot = str(tmp_path / "attention.png")
    local = _cli("translate", "--model", base, "--plot-attention", plot, *SENTENCES)
    assert local.returncode == 0, local.stderr[-3000:]
    with open(plot, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    in_process = local.stdout.splitlines()
    assert len(in_process) == 2

    port = free_port()
    env = {**os.environ, "PYTHONPATH": REPO, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "keras_transformer.cli",
            "serve",
            "--model-base-path",
            base,
            "--model-name",
            "translator",
            "--port",
            str(port),
            "--poll-seconds",
            "0.5",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 300
        for line in server.stdout:
            if line.startswith("READY"):
                break
            assert time.time() < deadline
        remote = _cli(
            "client", "--server", f"127.0.0.1:{port}", "--model", "translator", *SENTENCES
        )
        assert remote.returncode == 0, remote.stderr[-3000:]
        assert remote.stdout.splitlines() == in_process

        result = _cli(
            "export", "--run", trained_run["run"], "--export-base", base, "--max-length", "24"
        )
        assert result.returncode == 0 and result.stdout.strip().endswith("2")
        with GrpcTranslationClient(f"127.0.0.1:{port}", "translator") as client:
            deadline = time.time() + 120
            while client.status() != [(1, "END"), (2, "AVAILABLE")] and time.time() < deadline:
                time.sleep(0.3)
            assert client.status() == [(1, "END"), (2, "AVAILABLE")]
            assert client.translate(SENTENCES)["translation"] == in_process
    finally:
        server.terminate()
        server.wait(timeout=60)
