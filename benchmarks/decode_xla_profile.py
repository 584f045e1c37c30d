"""Where a compiled decoding step's time goes, by XLA's own profile.

Runs the search of a `--jit-compile` export (`Translator(jit_compile=True)`
over `LeanStep`) on the `small` model of `decode_latency.py` (random
weights, the end token disabled, 32 tokens, sources of 24 random ids),
under TensorFlow's profiler with XLA's per-kernel trace
(`XLA_FLAGS=--xla_cpu_enable_xprof_traceme=true`), and prints the kernels
that run once a step (in each of the search's loops, one per cache
length), summed over the run: matrix products (`dot`,
`MatMul`), the search's top-k (`custom-call`, XLA's TopK), the cache
reorder (`gather`) and the rest, with their count. The profiler's own cost
inflates every kernel a little: compare shares, not totals.

    XLA_FLAGS=--xla_cpu_enable_xprof_traceme=true \\
        .venv/bin/python benchmarks/decode_xla_profile.py [--batch 1] [--beams 4] [--top 15]
"""

import argparse
import collections
import glob
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from decode_latency import GENERATED as STEPS  # noqa: E402
from decode_latency import SOURCE_LENGTH, VOCAB, random_small_model  # noqa: E402


def _kind(name):
    for kind, marks in (("matrix products", ("dot", "MatMul")), ("top-k", ("custom-call",)),
                        ("cache reorder (gather)", ("gather",))):  # fmt: skip
        if any(mark in name for mark in marks):
            return kind
    return "other kernels"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from keras_transformer.decoding import Translator, _common

    model = random_small_model()
    # As the export compiles it: the fused kernels held as variables.
    translator = Translator(model, None, None, max_output_length=STEPS, jit_compile=True)
    search = tf.function(
        lambda c: translator._search_ids(c, args.beams, lean=True), jit_compile=True,
        autograph=False,
    )  # fmt: skip
    context = tf.constant(np.random.default_rng(0).integers(4, VOCAB, (args.batch, SOURCE_LENGTH)))
    context = tf.cast(context, tf.int32)
    for _ in range(3):
        search(context)[0].numpy()
    times = []
    for _ in range(7):
        start = time.perf_counter()
        search(context)[0].numpy()
        times.append(time.perf_counter() - start)
    print(f"batch {args.batch}, beams {args.beams}: {np.median(times) * 1000:.1f} ms unprofiled")

    logdir, runs = tempfile.mkdtemp(), 3
    try:
        tf.profiler.experimental.start(logdir)
        for _ in range(runs):
            search(context)[0].numpy()
        tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        with open(
            glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0], "rb"
        ) as f:
            space.ParseFromString(f.read())
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    total, count = collections.Counter(), collections.Counter()
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                name = names.get(event.metadata_id, "?")
                total[name] += event.duration_ps / 1e6 / runs
                count[name] += 1 / runs
    # The search runs a loop per cache length (16 positions, then 32, ...):
    # the kernels of a loop's body run once a step of its segment (the last
    # loop may stop a step early).
    bounds = _common.state_lengths(STEPS)
    segments = [end - start for start, end in zip([0] + bounds, bounds)]
    step = {
        n: us
        for n, us in total.items()
        if any(size - 8 <= count[n] <= size + 1 for size in segments)
    }
    if not step:
        sys.exit("No per-kernel trace: set XLA_FLAGS=--xla_cpu_enable_xprof_traceme=true")
    print(f"{len(step)} kernels in the loops of {segments} steps, "
          f"{sum(step.values()) / 1000:.1f} ms over {STEPS} steps")  # fmt: skip
    kinds = collections.Counter()
    for name, us in step.items():
        kinds[_kind(name)] += us
    for kind, us in kinds.most_common():
        print(f"  {kind}: {us / 1000:.1f} ms ({us / sum(step.values()):.0%})")
    print("| kernel | us a step | ms a run |\n| --- | --- | --- |")
    for name, us in sorted(step.items(), key=lambda item: -item[1])[: args.top]:
        print(f"| {name} | {us / count[name]:.1f} | {us / 1000:.2f} |")


if __name__ == "__main__":
    main()
