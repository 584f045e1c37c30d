"""What a decoding step of the `small` preset cannot go below on this machine.

Splits the batch-1 decode latency of `decode_latency.py` into parts that
need no model: each runs 32 iterations of a `tf.while_loop` in a session
(the way TF Serving runs the export; no XLA), median of `--repeats`.

- `matmuls`: only the 25 matrix products of one decoder step (3 blocks:
  self-attention query/key/value/output, cross-attention query/output,
  two feed-forward layers; then the 256 x 8,000 output projection), on
  `rows` rows (4 = beam 4 at batch 1), with float32 weights held in
  variables (float32: 19.2 MB a step; bfloat16 halves it). This is the
  weight-streaming floor.
- `search`: `beam_search` (beam 4) and `greedy_search` around a step
  function that only looks logits up in a table: the searches' own cost.

    .venv/bin/python benchmarks/decode_floor.py [--repeats 15] [--matmul-dtypes float32,bfloat16]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer.decoding import Rules, beam_search, greedy_search  # noqa: E402

LAYERS, D_MODEL, DFF, VOCAB, STEPS = 3, 256, 1024, 8000, 32
END_ID = 3


def _session_ms(build, repeats):
    """Median wall time of running `build()`'s output in a fresh session."""
    graph = tf.Graph()
    with graph.as_default():
        output = build()
        session = tf.compat.v1.Session(graph=graph)
        session.run(tf.compat.v1.global_variables_initializer())
    for _ in range(3):
        session.run(output)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        session.run(output)
        times.append(time.perf_counter() - start)
    session.close()
    return float(np.median(times)) * 1000


def _step_kernel_shapes():
    per_block = [(D_MODEL, D_MODEL)] * 6 + [(D_MODEL, DFF), (DFF, D_MODEL)]
    return per_block * LAYERS + [(D_MODEL, VOCAB)]


def matmuls(rows, dtype):
    def build():
        kernels = [
            tf.Variable(tf.cast(tf.random.normal(shape, stddev=0.02), dtype))
            for shape in _step_kernel_shapes()
        ]

        def body(i, x):
            hidden, total = x, 0.0
            for kernel in kernels:
                inputs = (
                    hidden if kernel.shape[0] == D_MODEL else tf.tile(hidden, [1, DFF // D_MODEL])
                )
                y = tf.cast(tf.matmul(tf.cast(inputs, dtype), kernel), tf.float32)
                total += tf.reduce_sum(y)
                if y.shape[1] == D_MODEL:
                    hidden = y
            # Feeds the products back so that no step can be skipped.
            return i + 1, hidden + 0.0 * total

        return tf.while_loop(lambda i, x: i < STEPS, body, (0, tf.ones([rows, D_MODEL])))

    return build


def search(batch, beams):
    def build():
        table = tf.random.stateless_normal([64, VOCAB], seed=[1, 2])
        # The end token never wins, so every run generates STEPS tokens.
        table = tf.tensor_scatter_nd_update(
            table, [[r, END_ID] for r in range(64)], tf.fill([64], -1e9)
        )

        def step(ids, index, state):
            return tf.gather(table, (ids + index) % 64), state

        state = {"unused": tf.zeros([batch, 1])}
        start = tf.fill([batch], 2)
        if beams == 1:
            return greedy_search(step, start, state, max_length=STEPS, rules=Rules(end_id=END_ID))
        return beam_search(
            step, start, state, beam_size=beams, max_length=STEPS, rules=Rules(end_id=END_ID)
        )

    return build


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument(
        "--matmul-dtypes",
        default="float32,bfloat16",
        help="weight dtypes of the matmul rows (comma-separated)",
    )
    args = parser.parse_args()
    dtypes = args.matmul_dtypes.split(",")
    print("| part | rows | ms for 32 steps |")
    print("| --- | --- | --- |")
    for dtype in dtypes:
        megabytes = sum(a * b for a, b in _step_kernel_shapes()) * tf.as_dtype(dtype).size / 1e6
        for rows in (1, 4, 128):
            ms = _session_ms(matmuls(rows, tf.as_dtype(dtype)), args.repeats)
            print(f"| 25 matmuls of a step, {dtype} ({megabytes:.1f} MB) | {rows} | {ms:.1f} |")
    for batch in (1, 32):
        for beams in (4, 1):
            name = "beam_search, beam 4" if beams == 4 else "greedy_search"
            print(
                f"| {name}, table lookup step | {batch * beams} | "
                f"{_session_ms(search(batch, beams), args.repeats):.1f} |"
            )


if __name__ == "__main__":
    main()
