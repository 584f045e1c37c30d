"""Follows one guide in a fresh process: `python tests/docs_driver.py
PLAN.json`, where the plan (from tests/test_docs.py) holds the page's steps
(`tests.docs_pages.steps`, tiny settings and free ports in place), its
Python blocks, and the folder to run them in.

Commands run in this process through `keras_transformer.cli.main`, as the
console script calls it (one TensorFlow import for the page, not one a
command); `serve` runs as a process of its own, as a reader starts it in a
second terminal, until the page is done. The Python blocks then run in
one fresh process, in order. The first step that fails ends the page:
the exit status is 1 and the last line names the step.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

from tests.serving.conftest import wait_for

SERVE_TIMEOUT = 240


def _wait_for_model(rest_port, name, server):
    """Waits until the server reports a version of `name` AVAILABLE, as a
    readiness probe on TF Serving's model-status endpoint does."""
    url = f"http://127.0.0.1:{rest_port}/v1/models/{name}"

    def available():
        if server.poll() is not None:
            raise RuntimeError(f"serve exited with {server.returncode} before {name} was up")
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                states = [v["state"] for v in json.load(answer)["model_version_status"]]
        except OSError:
            return False
        return "AVAILABLE" in states

    if not wait_for(available, SERVE_TIMEOUT, interval=0.5):
        raise RuntimeError(f"{name} was not AVAILABLE within {SERVE_TIMEOUT} s")


def _flag(argv, flag, default=None):
    return argv[argv.index(flag) + 1] if flag in argv else default


def _run_step(kind, payload, servers, env):
    if kind == "skip":
        line, reason = payload
        print(f"skipped: {line} ({reason})", flush=True)
        return
    if kind == "cli" and payload[0] == "serve":
        command = [sys.executable, "-m", "keras_transformer.cli", *payload]
        server = subprocess.Popen(command, env=env)
        servers.append(server)
        _wait_for_model(_flag(payload, "--rest-api-port"), _flag(payload, "--model-name"), server)
    elif kind == "cli":
        from keras_transformer import cli

        try:
            status = cli.main(payload)
        except SystemExit as exit_:
            status = exit_.code
        if status not in (0, None):
            raise RuntimeError(f"exited with {status}")
    elif kind == "curl" and shutil.which("curl") is None:
        print(f"skipped: curl {' '.join(payload)} (no curl on this machine)", flush=True)
        return
    else:
        program = {
            "python-m": [sys.executable, *payload],
            "script": [sys.executable, "-c", payload],
            "curl": ["curl", "--fail-with-body", *payload],
        }[kind]
        result = subprocess.run(program, env=env, capture_output=True, text=True, timeout=600)
        print(result.stdout[-2000:], flush=True)
        if result.returncode != 0:
            raise RuntimeError(f"exited with {result.returncode}: {result.stderr[-3000:]}")
        if kind == "curl":
            json.loads(result.stdout)  # TF Serving's REST API answers JSON
    print(f"ok: {kind} {payload if isinstance(payload, str) else ' '.join(payload)}", flush=True)


def main(plan_path):
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    os.chdir(plan["workdir"])
    env = {**os.environ, **plan.get("env", {})}
    os.environ.update(plan.get("env", {}))
    servers = []
    try:
        for kind, payload in plan["steps"]:
            start = time.monotonic()
            try:
                _run_step(kind, payload, servers, env)
            except Exception as error:  # named in one line, below
                print(f"FAILED step {kind} {payload}: {error}", flush=True)
                return 1
            # Each step's time, so that a slow page says which step it was.
            print(f"{time.monotonic() - start:.1f} s", flush=True)
        if plan["snippets"]:
            code = "\n\n".join(plan["snippets"])
            result = subprocess.run([sys.executable, "-c", code], env=env, timeout=900)
            if result.returncode != 0:
                print(f"FAILED the page's Python blocks, exit {result.returncode}", flush=True)
                return 1
            print("ok: the page's Python blocks", flush=True)
        return 0
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
