"""Latency of one export under TF Serving's C++ loader and the Python session.

Builds the C++ loader (keras_transformer.export.cc_loader), exports a
`tiny`-preset translator (untrained, so that every hypothesis runs the full
`--max-length` steps: the worst case per request), and times each signature
at batch 1 and 8 in both runtimes, side by side in one run:

    .venv/bin/python benchmarks/cc_loader_latency.py [--repeats 20] [--export DIR]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_transformer.data import SubwordTokenizer, generate_pairs  # noqa: E402
from keras_transformer.export import SessionModel, cc_loader, export_translator  # noqa: E402
from keras_transformer.models import Transformer  # noqa: E402

SENTENCE = "The young woman reads the book in the garden."


def _export(path, max_length):
    pairs = generate_pairs(3000, seed=1)
    source = SubwordTokenizer.train([p[0] for p in pairs], 1000)
    target = SubwordTokenizer.train([p[1] for p in pairs], 1000)
    keras.utils.set_random_seed(1)
    model = Transformer.from_preset("tiny", source.vocab_size, target.vocab_size, max_length=256)
    model.build(((None, None), (None, None)))
    export_translator(model, source, target, path, max_length=max_length, beam_size=4)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--export", help="an export version directory (default: make one)")
    args = parser.parse_args()
    export = args.export or _export(os.path.join(tempfile.mkdtemp(), "1"), args.max_length)
    binary = cc_loader.build()
    session = SessionModel(export)
    print("| signature | batch | C++ LoadSavedModel p50 (ms) | Python session p50 (ms) |")
    print("| --- | --- | --- | --- |")
    for signature in ("serving_default", "translate_greedy"):
        for batch in (1, 8):
            sentences = [SENTENCE] * batch
            _, cc = cc_loader.run(binary, export, signature, sentences, repeats=args.repeats + 1)
            text = {"text": np.array([s.encode() for s in sentences], dtype=object)}
            session.run(signature, text)  # the first run builds the kernels
            python = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                session.run(signature, text)
                python.append((time.perf_counter() - start) * 1000)
            cc_ms, py_ms = statistics.median(cc[1:]), statistics.median(python)
            print(f"| {signature} | {batch} | {cc_ms:.1f} | {py_ms:.1f} |")


if __name__ == "__main__":
    main()
