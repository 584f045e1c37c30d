"""The first request's latency, with and without TF Serving's warmup records.

Exports one `tiny`-preset translator (untrained: every hypothesis runs the
full 32 steps), copies it as a version without the warmup file, and times the
first and the second `serving_default` request (batch 1) to a fresh
`keras-transformer serve` of each, side by side in one run:

    .venv/bin/python benchmarks/serve_warmup.py [--rounds 3]
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from keras_transformer.data import SubwordTokenizer, generate_pairs  # noqa: E402
from keras_transformer.export import export_translator  # noqa: E402
from keras_transformer.export.warmup import WARMUP_PATH  # noqa: E402
from keras_transformer.models import Transformer  # noqa: E402
from keras_transformer.serving.grpc_client import GrpcTranslationClient  # noqa: E402
from keras_transformer.serving.server import start_server  # noqa: E402


def _export(root):
    pairs = generate_pairs(3000, seed=1)
    source = SubwordTokenizer.train([p[0] for p in pairs], 1000)
    target = SubwordTokenizer.train([p[1] for p in pairs], 1000)
    keras.utils.set_random_seed(1)
    model = Transformer.from_preset("tiny", source.vocab_size, target.vocab_size, max_length=256)
    model.build(((None, None), (None, None)))
    warm = os.path.join(root, "warm", "1")
    export_translator(model, source, target, warm, max_length=32, beam_size=4)
    cold = os.path.join(root, "cold", "1")
    shutil.copytree(warm, cold)
    os.remove(os.path.join(cold, WARMUP_PATH))
    return {"with warmup": os.path.dirname(warm), "without": os.path.dirname(cold)}


def _first_two(base):
    start = time.monotonic()
    server, port, manager = start_server(base, "translator", port=0, poll_seconds=0)
    loaded = time.monotonic() - start
    times = []
    with GrpcTranslationClient(f"127.0.0.1:{port}", "translator", timeout=300) as client:
        for _ in range(2):
            start = time.monotonic()
            client.translate(["The young woman reads the book in the garden."])
            times.append((time.monotonic() - start) * 1000)
    server.stop(0)
    manager.stop()
    return loaded, times


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    bases = _export(tempfile.mkdtemp())
    results = {name: [] for name in bases}
    for _ in range(args.rounds):
        for name, base in bases.items():
            results[name].append(_first_two(base))
    print("| export | load incl. warmup (s) | first request (ms) | second request (ms) |")
    print("| --- | --- | --- | --- |")
    for name, rows in results.items():
        load = statistics.median(r[0] for r in rows)
        first = statistics.median(r[1][0] for r in rows)
        second = statistics.median(r[1][1] for r in rows)
        print(f"| {name} | {load:.1f} | {first:.0f} | {second:.0f} |")


if __name__ == "__main__":
    main()
