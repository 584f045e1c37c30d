"""Load test of `keras-transformer serve`: good clients, then good and hostile.

Usage (from the repository root, after `make demo` or any export):

    .venv/bin/python benchmarks/serve_load.py --model-base-path exports/demo \\
        --clients 8 --hostile 4 --seconds 60

Starts the server on a free loopback port in a subprocess and runs two
phases of `--seconds` each, clients in this process (one channel each):
`clean`, `--clients` good clients alone; and `hostile`, the same good
clients beside `--hostile` clients that send what a careless or hostile
client would: shapes that lie about their values, too many rows, oversized
strings, the wrong dtype, and large requests that give up after 0.2 s.
Prints, per phase, the good requests' errors, p50/p99 latency and
sentences per second, the hostile requests answered, and the server's peak
resident memory, as table rows for benchmarks/RESULTS.md. Exits 1 if any
good request failed.
"""

import argparse
import os
import random
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import grpc  # noqa: E402
import psutil  # noqa: E402
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2  # noqa: E402
from tensorflow_serving.apis import predict_pb2  # noqa: E402

from keras_transformer.data.synthetic import generate_pairs  # noqa: E402
from keras_transformer.serving.grpc_client import GrpcTranslationClient  # noqa: E402


def _tensor(dims, values, dtype=types_pb2.DT_STRING):
    shape = tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims]
    )
    if dtype == types_pb2.DT_STRING:
        return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape, string_val=values)
    return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape, int_val=values)


def _hostile_requests(sentences):
    """(name, tensor, deadline) of each kind of hostile request."""
    long = [s.encode() for s in sentences[:300]]
    return [
        ("shape lie", _tensor([5000, 5000], [b"x"]), 30),
        ("no values", _tensor([300], []), 30),
        ("too many rows", _tensor([5000], [b"x"] * 5000), 30),
        ("huge string", _tensor([1], [b"y" * 40000]), 30),
        ("wrong dtype", _tensor([2], [1, 2], dtype=types_pb2.DT_INT32), 30),
        ("gives up", _tensor([len(long)], long), 0.2),
    ]


class _Phase:
    def __init__(self):
        self.lock = threading.Lock()
        self.latencies, self.errors, self.sentences = [], [], 0
        self.hostile = {}

    def percentile(self, q):
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _run_phase(port, sentences, clients, hostile, seconds, server_process):
    phase = _Phase()
    deadline = time.monotonic() + seconds

    def good(seed):
        rng = random.Random(seed)
        with GrpcTranslationClient(f"127.0.0.1:{port}", "translator", timeout=120) as client:
            while time.monotonic() < deadline:
                batch = [rng.choice(sentences)]
                start = time.monotonic()
                try:
                    client.translate(batch)
                except Exception as error:  # counted, reported
                    with phase.lock:
                        phase.errors.append(repr(error)[:300])
                    continue
                with phase.lock:
                    phase.latencies.append(time.monotonic() - start)
                    phase.sentences += len(batch)

    def bad(seed):
        rng = random.Random(1000 + seed)
        kinds = []
        for name, tensor, timeout in _hostile_requests(sentences):
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "translator"
            request.inputs["text"].CopyFrom(tensor)
            # Serialized once: the client's own work must not load the machine.
            kinds.append((name, request.SerializeToString(), timeout))
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            predict = channel.unary_unary(
                "/tensorflow.serving.PredictionService/Predict",
                request_serializer=None,
                response_deserializer=None,
            )
            while time.monotonic() < deadline:
                name, request, timeout = rng.choice(kinds)
                try:
                    predict(request, timeout=timeout)
                    code = "OK"
                except grpc.RpcError as error:
                    code = error.code().name
                with phase.lock:
                    key = (name, code)
                    phase.hostile[key] = phase.hostile.get(key, 0) + 1

    peak = [server_process.memory_info().rss]

    def watch_memory():
        while time.monotonic() < deadline:
            peak[0] = max(peak[0], server_process.memory_info().rss)
            time.sleep(0.2)

    threads = [threading.Thread(target=good, args=(i,)) for i in range(clients)]
    threads += [threading.Thread(target=bad, args=(i,)) for i in range(hostile)]
    threads.append(threading.Thread(target=watch_memory))
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    phase.elapsed = time.monotonic() - began
    phase.peak_rss = peak[0]
    return phase


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model-base-path", default="exports/demo")
    parser.add_argument("--clients", type=int, default=8, help="good clients")
    parser.add_argument("--hostile", type=int, default=4, help="hostile clients (0: clean only)")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each phase")
    args = parser.parse_args()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [
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
    ]
    server = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    for line in server.stdout:
        if line.startswith("READY"):
            break
    threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()
    process = psutil.Process(server.pid)
    sentences = [en for en, _ in generate_pairs(500, seed=99)]

    phases = [("clean", 0)] + ([("hostile", args.hostile)] if args.hostile else [])
    results = {}
    for name, hostile in phases:
        results[name] = _run_phase(port, sentences, args.clients, hostile, args.seconds, process)
    server.terminate()
    server.wait(timeout=120)

    print(
        "| phase | good clients | hostile clients | good requests | good errors | p50 | p99 "
        "| sentences/s | hostile answered | server peak RSS |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, hostile in phases:
        r = results[name]
        answered = sum(r.hostile.values())
        print(
            f"| {name} | {args.clients} | {hostile} | {len(r.latencies)} | {len(r.errors)} "
            f"| {r.percentile(0.5):.0f} ms | {r.percentile(0.99):.0f} ms "
            f"| {r.sentences / r.elapsed:.1f} | {answered} | {r.peak_rss / 2**20:.0f} MiB |"
        )
    if "hostile" in results:
        counts = sorted(results["hostile"].hostile.items())
        print("hostile requests by kind and status:", ", ".join(f"{k}={v}" for k, v in counts))
        clean, mixed = results["clean"], results["hostile"]
        print(
            f"p50 ratio hostile/clean: {mixed.percentile(0.5) / clean.percentile(0.5):.2f}; "
            f"p99 ratio: {mixed.percentile(0.99) / clean.percentile(0.99):.2f}"
        )
    errors = [e for r in results.values() for e in r.errors]
    if errors:
        print("first errors:", errors[:3])
        sys.exit(1)


if __name__ == "__main__":
    main()
