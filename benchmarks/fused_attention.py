"""`MultiHeadAttention`, fused against einsum: time and peak memory of the
layer's forward and backward pass under PyTorch and JAX.

The fused path is `keras.ops.dot_product_attention` (PyTorch's
`scaled_dot_product_attention`, JAX's `dot_product_attention`), which the
layer takes when no scores are asked for; the einsum path is the same call
with `return_attention_scores=True`, which always computes and holds the
`[batch, heads, query, key]` weights. Self-attention without a mask,
d_model 512, 8 heads of 64, batch 1, float32, at sequence lengths 128 to
2,048; each case runs in a fresh process, its peak memory the rise of the
process's peak resident set over the case (`ru_maxrss`), its time the median
forward-and-backward of `--repeats` after one untimed pass (JAX: one jitted
function of value and gradient; PyTorch: eager, `loss.backward()`).

    .venv/bin/python benchmarks/fused_attention.py [--repeats 5] [--lengths 128,512,1024,2048]
"""

import argparse
import json
import os
import subprocess
import sys

D_MODEL, HEADS = 512, 8


def run_case(backend, length, fused, repeats):
    """One case in this process (KERAS_BACKEND already set): `{"ms", "peak_mib"}`."""
    import resource
    import time

    import keras
    import numpy as np

    from keras_transformer.layers import MultiHeadAttention

    keras.utils.set_random_seed(0)
    layer = MultiHeadAttention(HEADS, D_MODEL // HEADS)
    layer.build((1, length, D_MODEL), (1, length, D_MODEL))
    x = np.random.default_rng(0).normal(size=(1, length, D_MODEL)).astype("float32")
    scores = not fused

    if backend == "torch":
        import torch

        inputs = torch.tensor(x, requires_grad=True)

        def step():
            out = layer(inputs, inputs, return_attention_scores=scores)
            out = out[0] if scores else out
            out.sum().backward()
            return float(inputs.grad[0, 0, 0])

    else:
        import jax

        trainable = [v.value for v in layer.trainable_variables]
        non_trainable = [v.value for v in layer.non_trainable_variables]

        def loss(trainable, inputs):
            out, _ = layer.stateless_call(
                trainable, non_trainable, inputs, inputs, return_attention_scores=scores
            )
            out = out[0] if scores else out
            return out.sum()

        grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
        inputs = jax.numpy.asarray(x)

        def step():
            value, grads = grad(trainable, inputs)
            return float(jax.block_until_ready(grads[1])[0, 0, 0])

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"ms": float(np.median(times)) * 1000, "peak_mib": (peak - before) / 1024}


def _in_fresh_process(backend, length, fused, repeats):
    here = os.path.dirname(os.path.abspath(__file__))
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import fused_attention; "
        "print('RESULT ' + json.dumps(fused_attention.run_case(*json.loads(sys.argv[3]))))"
    )
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, "-c", code, here, os.path.dirname(here),
         json.dumps([backend, length, fused, repeats])],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"{backend} {length} fused={fused}:\n{result.stderr[-3000:]}")
    line = [x for x in result.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lengths", default="128,512,1024,2048")
    parser.add_argument("--backends", default="torch,jax")
    args = parser.parse_args()
    print("| backend | length | einsum (ms) | fused (ms) | speed-up | einsum peak (MiB) "
          "| fused peak (MiB) |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for backend in args.backends.split(","):
        for length in (int(n) for n in args.lengths.split(",")):
            einsum = _in_fresh_process(backend, length, False, args.repeats)
            fused = _in_fresh_process(backend, length, True, args.repeats)
            print(f"| {backend} | {length} | {einsum['ms']:.1f} | {fused['ms']:.1f} "
                  f"| {einsum['ms'] / fused['ms']:.2f}x | {einsum['peak_mib']:.0f} "
                  f"| {fused['peak_mib']:.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
