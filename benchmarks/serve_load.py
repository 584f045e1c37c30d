"""Load test of `keras-transformer serve`: N concurrent gRPC clients for T seconds.

Usage (from the repository root, after `make demo` or any export):

    .venv/bin/python benchmarks/serve_load.py --model-base-path exports/demo \
        --clients 8 --seconds 60

Starts the server on a free loopback port in a subprocess, runs the clients
in this process (one channel each), and prints errors, p50/p99 latency and
sentences per second as a table row for benchmarks/RESULTS.md.
"""

import argparse
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_transformer.data.synthetic import generate_pairs  # noqa: E402
from keras_transformer.serving.grpc_client import GrpcTranslationClient  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-base-path", default="exports/demo")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--sentences-per-request", type=int, default=1)
    args = parser.parse_args()

    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "keras_transformer.cli",
            "serve",
            "--model-base-path",
            args.model_base_path,
            "--model-name",
            "translator",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    for line in server.stdout:
        if line.startswith("READY"):
            break
    threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()

    sentences = [en for en, _ in generate_pairs(500, seed=99)]
    latencies, errors, done = [], [], [0]
    lock = threading.Lock()
    deadline = time.monotonic() + args.seconds

    def client_loop(seed):
        rng = random.Random(seed)
        with GrpcTranslationClient(f"127.0.0.1:{port}", "translator", timeout=60) as client:
            while time.monotonic() < deadline:
                batch = rng.sample(sentences, args.sentences_per_request)
                start = time.monotonic()
                try:
                    client.translate(batch)
                except Exception as error:  # counted, reported
                    with lock:
                        errors.append(repr(error))
                    continue
                with lock:
                    latencies.append(time.monotonic() - start)
                    done[0] += len(batch)

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(args.clients)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    server.terminate()
    server.wait(timeout=60)

    latencies.sort()

    def p(q):
        if not latencies:
            return float("nan")
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000

    print(
        f"| {args.clients} clients x {args.seconds:.0f} s | requests {len(latencies)} "
        f"| errors {len(errors)} "
        f"| p50 {p(0.50):.0f} ms | p99 {p(0.99):.0f} ms | {done[0] / elapsed:.1f} sentences/s |"
    )
    if errors:
        print("first errors:", errors[:3])
        sys.exit(1)


if __name__ == "__main__":
    main()
