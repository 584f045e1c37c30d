"""What a translation shorter than `max_length` costs, with caches that grow.

The searches keep their self-attention caches in fixed shapes (XLA needs
them; the plain search did too); every step reads them whole and beam
search reorders them whole. With caches of `max_length` positions (the
export's default is 128), a 20-token translation pays at every step for
128 positions. Both exports now grow them instead (`grow_state`): the
compiled one through 16 positions for the first 16 steps, 32 up to step
32, then 64, ...; the plain one through 32 then `max_length`.

This times, in one process, back to back, the plain search (the model's
`decode_step` in TensorFlow's graph executor, as the plain export runs it)
and the compiled one (`LeanStep`, as the `--jit-compile` export runs it),
each with caches of `max_length` positions and with growing ones, on the
`small` model of `decode_latency.py` (random weights, sources of 24 random
ids). The end token is forced from `--tokens` on (every translation has
`--tokens` tokens, then the end), so the work is the same in every column.
Beam 4 and greedy, batches of 1 and 32; median of `--repeats`; also the
time of the compiled search's first call (compilation included).

    .venv/bin/python benchmarks/decode_growing_caches.py [--max-length 128] [--tokens 20]
"""

import argparse
import functools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from decode_latency import SOURCE_LENGTH, VOCAB, random_small_model  # noqa: E402

CASES = (("beam4", 4, 1), ("greedy", 1, 1), ("beam4", 4, 32), ("greedy", 1, 32))


def _search(model, lean, context, beams, max_length, tokens, grow):
    from keras_transformer.data.tokenizer import END_ID, START_ID
    from keras_transformer.decoding import LeanStep, _common, beam_search, greedy_search
    from keras_transformer.decoding.translator import PLAIN_GROW_LENGTHS

    vocab = model.target_vocab_size
    # The lengths each export grows its caches through (the Translator's).
    lengths = None if lean else PLAIN_GROW_LENGTHS
    length = _common.grown_lengths(max_length, lengths)[0] if grow else max_length
    if lean:
        lean_step = LeanStep(model)
        constant, state = lean_step.initial_state(context, length)
        inner = lean_step.step_fn(constant, beams)
    else:
        # The search tiles it over beams, and reorders what the step changes.
        state = model.init_decoding_state(context, length)

        def inner(ids, index, loop_state):
            return model.decode_step(ids, index, loop_state)

    def step(ids, index, loop_state):
        logits, loop_state = inner(ids, index, loop_state)
        # The end token wins from position `tokens` on, far above the
        # disabled end token's bias.
        forced = tf.where(index >= tokens, 1e10, 0.0) * tf.one_hot(END_ID, vocab)
        return logits + forced, loop_state

    options = dict(max_length=max_length, end_id=END_ID)
    if grow:
        # The model's stacked cache `[batch, layers, 2, length, heads,
        # head_dim]` (the Translator keeps it per layer) grows on axis 3.
        axis = 2 if lean else 3
        options["grow_state"] = functools.partial(_common.grow_caches, axis=axis)
        options["grow_lengths"] = lengths
    start = tf.fill([tf.shape(context)[0]], START_ID)
    if beams == 1:
        return greedy_search(step, start, state, **options)
    return beam_search(step, start, state, beam_size=beams, **options)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    model = random_small_model()  # no translation ends before `--tokens`
    rng = np.random.default_rng(0)
    variants = {
        "plain, fixed": (False, False),
        "plain, growing": (False, True),
        "compiled, fixed": (True, False),
        "compiled, growing": (True, True),
    }
    print(f"max_length {args.max_length}, {args.tokens} tokens then the end, "
          f"median of {args.repeats}")  # fmt: skip
    print("| case | " + " | ".join(f"{n} (ms)" for n in variants)
          + " | fixed / growing, plain | fixed / growing, compiled "
          "| first call, compiled fixed / growing (s) |")  # fmt: skip
    print("| --- " * (len(variants) + 4) + "|")
    for name, beams, batch in CASES:
        context = tf.constant(rng.integers(4, VOCAB, (batch, SOURCE_LENGTH)), tf.int32)
        fns, first, outputs = {}, {}, {}
        for variant, (lean, grow) in variants.items():
            fns[variant] = tf.function(
                lambda c, lean=lean, grow=grow: _search(
                    model, lean, c, beams, args.max_length, args.tokens, grow
                ),
                jit_compile=lean,
                autograph=False,
            )
            start = time.perf_counter()
            outputs[variant] = fns[variant](context)[0].numpy()
            first[variant] = time.perf_counter() - start
        for variant, output in outputs.items():
            if not np.array_equal(output, outputs["compiled, fixed"]):
                print(f"{name} batch {batch}: {variant} translated differently", flush=True)
        times = {variant: [] for variant in fns}
        for _ in range(args.repeats):
            for variant, fn in fns.items():
                start = time.perf_counter()
                fn(context)[0].numpy()
                times[variant].append(time.perf_counter() - start)
        ms = {variant: float(np.median(t)) * 1000 for variant, t in times.items()}
        cells = " | ".join(f"{ms[v]:.1f}" for v in variants)
        plain = ms["plain, fixed"] / ms["plain, growing"]
        compiled = ms["compiled, fixed"] / ms["compiled, growing"]
        print(f"| {name}, batch {batch} | {cells} | {plain:.2f}x | {compiled:.2f}x | "
              f"{first['compiled, fixed']:.1f} / {first['compiled, growing']:.1f} |",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
