"""Training throughput of the `small` preset: this package vs keras-hub.

One training step (batch 64, source and target length 32, vocab 8000) of
the same architecture (3+3 layers, d_model 256, 4 heads, dff 1024, post-norm)
built from this package and from keras-hub's TransformerEncoder /
TransformerDecoder, with and without `jit_compile`, in float32 and under
`mixed_bfloat16`. Reports target tokens per second (median step time, the
eight configurations taking turns step by step) and the model-FLOPs
utilization against the matmul peak measured here.

    .venv/bin/pip install keras-hub   # for the comparison only
    .venv/bin/python benchmarks/train_throughput.py [--steps 20]
"""

import argparse
import json
import os
import platform
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

BATCH, LENGTH, VOCAB = 64, 32, 8000
LAYERS, D_MODEL, HEADS, DFF = 3, 256, 4, 1024


def matmul_peak(dtype, n=2048, repeats=10):
    """FLOP/s of an n^3 matmul in `dtype` on this machine."""
    a = tf.random.normal((n, n), dtype=tf.float32)
    a = tf.cast(a, dtype)
    f = tf.function(lambda x: tf.matmul(x, x))
    f(a).numpy()
    start = time.perf_counter()
    for _ in range(repeats):
        out = f(a)
    out.numpy()
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def model_flops_per_step():
    """Forward+backward FLOPs of one step (3x the forward matmuls)."""
    t, d, f = LENGTH, D_MODEL, DFF
    attention_proj = 4 * d * d
    encoder = LAYERS * (2 * t * (attention_proj + 2 * d * f) + 2 * 2 * t * t * d)
    decoder = LAYERS * (2 * t * (2 * attention_proj + 2 * d * f) + 2 * 2 * 2 * t * t * d)
    output = 2 * t * d * VOCAB
    return 3 * BATCH * (encoder + decoder + output)


def ours():
    from keras_transformer.models import Transformer

    model = Transformer(LAYERS, D_MODEL, HEADS, DFF, VOCAB, VOCAB, dropout=0.1)
    model.build(((None, None), (None, None)))
    return model


def keras_hub_model():
    import keras_hub

    context = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    x = keras_hub.layers.TokenAndPositionEmbedding(VOCAB, 512, D_MODEL, mask_zero=True)(context)
    for _ in range(LAYERS):
        x = keras_hub.layers.TransformerEncoder(DFF, HEADS, dropout=0.1)(x)
    y = keras_hub.layers.TokenAndPositionEmbedding(VOCAB, 512, D_MODEL, mask_zero=True)(target)
    for _ in range(LAYERS):
        y = keras_hub.layers.TransformerDecoder(DFF, HEADS, dropout=0.1)(y, x)
    logits = keras.layers.Dense(VOCAB, dtype="float32")(y)
    return keras.Model((context, target), logits)


def prepare(build, policy, jit):
    """Builds and compiles one model, runs 3 warm-up steps, returns its step."""
    from keras_transformer.losses import MaskedSparseCategoricalCrossentropy

    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(0)
    model = build()
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4),
        jit_compile=jit,
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
    )
    keras.config.set_dtype_policy("float32")
    rng = np.random.default_rng(0)
    context = rng.integers(1, VOCAB, (BATCH, LENGTH)).astype("int32")
    target = rng.integers(1, VOCAB, (BATCH, LENGTH + 1)).astype("int32")
    x, y = (context, target[:, :-1]), target[:, 1:]
    for _ in range(3):
        model.train_on_batch(x, y)
    return lambda: model.train_on_batch(x, y)


def measure_interleaved(steps_by_config, rounds):
    """Median step time of each config, the configs taking turns each round.

    Taking turns spreads any slow phase of a shared machine over every
    config alike, so that the ratios stay honest when the absolute times
    drift.
    """
    times = {config: [] for config in steps_by_config}
    for _ in range(rounds):
        for config, step in steps_by_config.items():
            start = time.perf_counter()
            step()
            times[config].append(time.perf_counter() - start)
    return {config: float(np.median(t)) for config, t in times.items()}


def main():
    from keras_transformer.training.host_memory import retain_freed_memory

    # As `keras-transformer train` does; it applies to both models alike.
    retain_freed_memory()
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    peaks = {"float32": matmul_peak(tf.float32), "mixed_bfloat16": matmul_peak(tf.bfloat16)}
    flops = model_flops_per_step()
    builders = (("keras_transformer", ours), ("keras_hub", keras_hub_model))
    steps = {}
    for policy in ("float32", "mixed_bfloat16"):
        for jit in (False, True):
            for name, build in builders:
                steps[(name, policy, jit)] = prepare(build, policy, jit)
                print(f"prepared {name} {policy} jit={jit}", flush=True)
    seconds_by = measure_interleaved(steps, args.steps)
    rows = []
    for (name, policy, jit), seconds in seconds_by.items():
        tokens = BATCH * LENGTH / seconds
        mfu = flops / seconds / peaks[policy]
        rows.append(
            dict(
                model=name,
                policy=policy,
                jit_compile=jit,
                step_ms=seconds * 1000,
                target_tokens_per_s=tokens,
                mfu=mfu,
            )
        )
        print(
            f"{name:18s} {policy:15s} jit={jit!s:5s} {seconds * 1000:8.1f} ms/step "
            f"{tokens:9.0f} tok/s  MFU {mfu:6.1%}",
            flush=True,
        )
    print(
        f"\nmatmul peak: float32 {peaks['float32'] / 1e12:.2f} TFLOP/s, "
        f"bfloat16 {peaks['mixed_bfloat16'] / 1e12:.2f} TFLOP/s; {flops / 1e9:.1f} GFLOP/step; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    )
    by = {(r["model"], r["policy"], r["jit_compile"]): r["target_tokens_per_s"] for r in rows}
    for policy in ("float32", "mixed_bfloat16"):
        for jit in (False, True):
            ratio = by[("keras_transformer", policy, jit)] / by[("keras_hub", policy, jit)]
            print(f"ours / keras-hub, {policy}, jit={jit}: {ratio:.2f}x")
    for jit in (False, True):
        ratio = (
            by[("keras_transformer", "mixed_bfloat16", jit)]
            / by[("keras_transformer", "float32", jit)]
        )
        print(f"ours bfloat16 / float32, jit={jit}: {ratio:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "peaks": peaks, "flops_per_step": flops}, f, indent=2)


if __name__ == "__main__":
    main()
