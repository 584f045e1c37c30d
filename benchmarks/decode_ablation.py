"""What each part of a decoding step costs, found by taking it out.

A session trace (`decode_trace.py`) names the ops of a step, but its
per-op durations overlap: on two cores, small ops that run beside a large
matmul are stretched by it. This script measures by removal instead: it
exports the model of `decode_latency.py` once as it is and once with a
part of the step replaced by an identity, and times both exports' batch-1
signatures in the same session setting (median of `--repeats`). The
numbers of an ablated export are wrong on purpose; only its latency means
anything. Each variant is exported and timed in a fresh process
(`decode_latency.in_fresh_process`), so that no patch leaks into the next.

- `attention`: the single-query attention over the cache (logits, masked
  softmax, weighted sum), self- and cross-attention; the projections stay.
- `attention+cache`: also the cache writes and the key/value split.
- `attention+cache+layernorm`: also every layer normalization.

    .venv/bin/python benchmarks/decode_ablation.py [--repeats 21]
"""

import argparse
import shutil
import tempfile

import decode_latency
from multi30k_data import add_data_argument

VARIANTS = ("none", "attention", "attention+cache", "attention+cache+layernorm")


def _remove(parts):
    """Replaces `parts` of the step with identities (in this process only)."""
    import keras

    from keras_transformer.layers import attention

    if "attention" in parts:
        # The query stands in for the context: same shape, no attention ops.
        attention.MultiHeadAttention._attend_one_query = lambda self, q, *args, **kwargs: (q, None)
    if "cache" in parts:
        attention._write_cache = lambda cache, index, new: cache
        attention._split_cache = lambda cache: (cache[:, 0], cache[:, 0])
    if "layernorm" in parts:
        keras.layers.LayerNormalization.call = lambda self, inputs: inputs


def measure(variant, repeats, data_dir):
    """`{"beam4": ms, "greedy": ms}` at batch 1 of an export with `variant`
    removed from its step (patches this process: run it in a fresh one)."""
    if variant != "none":
        _remove(variant.split("+"))
    from keras_transformer.export import SessionModel

    base = tempfile.mkdtemp()
    try:
        path, sentences = decode_latency.export_small(data_dir, base)
        served = SessionModel(path)
        times = decode_latency.time_signatures(served, sentences[:1], repeats)
        served.close()
        return times
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    add_data_argument(parser)
    args = parser.parse_args()
    print("| removed from the step | beam 4, batch 1 (ms) | greedy, batch 1 (ms) |")
    print("| --- | --- | --- |")
    for variant in VARIANTS:
        ms = decode_latency.in_fresh_process(
            "decode_ablation", "measure", variant, args.repeats, args.data
        )
        print(f"| {variant} | {ms['beam4']:.1f} | {ms['greedy']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
