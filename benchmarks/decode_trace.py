"""Where a decoding step's time goes: a session trace of the export.

Exports the model of `decode_latency.py` (the `small` size, 32 generated
tokens, end token disabled), runs one signature at batch 1 in the session
TF Serving uses (no XLA) with a full trace (`RunOptions.FULL_TRACE`), and
tallies the trace's op executions: per op type and per graph node, how
many ran and how long they took, divided by the 32 steps, so the table
reads as "one decoding step". Ops that run once per request (tokenizers,
encoder, set-up) are divided too; the `per request` column tells them
apart.

    .venv/bin/python benchmarks/decode_trace.py [--signature serving_default] [--top 30]
"""

import argparse
import collections
import os
import shutil
import sys
import tempfile

from multi30k_data import add_data_argument

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import decode_latency  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def trace(served, signature, text, runs):
    """The node stats of `runs` traced runs (after one untraced warm-up)."""
    sig = served.signature(signature)
    feeds = {sig.inputs["text"].name: text}
    fetches = {k: v.name for k, v in sig.outputs.items()}
    served.session.run(fetches, feeds)
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    nodes = []
    for _ in range(runs):
        metadata = tf.compat.v1.RunMetadata()
        served.session.run(fetches, feeds, options=options, run_metadata=metadata)
        for device in metadata.step_stats.dev_stats:
            nodes.extend(device.node_stats)
    return nodes


def op_type(node):
    # timeline_label: "name = OpType(inputs)"; _SOURCE and the like have none.
    label = node.timeline_label
    return label.split(" = ", 1)[1].split("(", 1)[0] if " = " in label else node.node_name


def tally(nodes, key):
    count, micros = collections.Counter(), collections.Counter()
    for node in nodes:
        k = key(node)
        count[k] += 1
        micros[k] += node.op_end_rel_micros
    return count, micros


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signature", default="serving_default")
    add_data_argument(parser)
    parser.add_argument("--runs", type=int, default=3, help="traced runs, averaged")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    from keras_transformer.export import SessionModel

    base = tempfile.mkdtemp()
    try:
        path, sentences = decode_latency.export_small(args.data, base)
        served = SessionModel(path)
        text = np.array([sentences[0].encode()], dtype=object)
        nodes = trace(served, args.signature, text, args.runs)
        served.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    steps = decode_latency.GENERATED * args.runs
    per_run = len(nodes) / args.runs
    busy = sum(n.op_end_rel_micros for n in nodes) / args.runs / 1000
    print(
        f"{args.signature}, batch 1, {decode_latency.GENERATED} steps: "
        f"{per_run:.0f} op executions a request ({per_run / decode_latency.GENERATED:.0f} "
        f"a step), {busy:.1f} ms of op time a request (both cores together)"
    )
    for title, key in (("op type", op_type), ("graph node", lambda n: n.node_name)):
        count, micros = tally(nodes, key)
        print(f"\n| {title} | runs a step | us a step | per request |")
        print("| --- | --- | --- | --- |")
        for name, total in micros.most_common(args.top):
            runs = count[name] / steps
            once = "once" if count[name] <= args.runs * 2 else ""
            print(f"| {name} | {runs:.2f} | {total / steps:.1f} | {once} |")


if __name__ == "__main__":
    main()
