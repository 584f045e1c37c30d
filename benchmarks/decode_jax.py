"""Decoding latency under JAX's `jit`: the model's own `decode_step`.

The step the exports run (`Transformer.decode_step(..., compiled=True)`:
caches written in place, the self-attention projections fused, the beams
of a source sharing its encoder keys and values) jitted under the JAX
backend, on the `small` model of `decode_latency.py` (random weights, seed
0, the end token disabled: exactly 32 generated tokens; 8,000-piece
vocabularies; 24-token sources of random ids). Greedy search and beam
search (4 beams, log-probabilities summed, no length penalty: the same
steps and reorders as the library's searches), each one `jax.jit` of
the encoder, the first state and a `lax.fori_loop` over the steps, at
batch 1 and 32; median of `--repeats` calls after a compiling one. The
searches are this script's: the library's searches are TensorFlow's.

    KERAS_BACKEND=jax .venv/bin/python benchmarks/decode_jax.py [--repeats 9]
"""

import argparse
import os
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

from small_model import GENERATED, SOURCE_LENGTH, VOCAB, random_small_model  # noqa: E402

BEAMS = 4


def _searches(model):
    """`{"greedy": fn, "beam4": fn}`, each `source_ids -> ids`, jitted."""
    import jax
    import jax.numpy as jnp

    from keras_transformer.special_ids import START_ID

    def prepare(source_ids, beams):
        state = model.init_decoding_state(source_ids, GENERATED)
        constant = {key: state.pop(key) for key in ("cross_attention_cache", "encoder_mask")}
        caches = jax.tree.map(lambda t: jnp.repeat(t, beams, axis=0), state)
        return constant, caches

    def step(constant, ids, index, caches):
        logits, state = model.decode_step(ids, index, {**constant, **caches}, compiled=True)
        return jax.nn.log_softmax(logits), {"self_attention_cache": state["self_attention_cache"]}

    @jax.jit
    def greedy(source_ids):
        constant, caches = prepare(source_ids, 1)
        rows = source_ids.shape[0]

        def body(i, carry):
            ids, out, caches = carry
            log_probs, caches = step(constant, ids, i, caches)
            ids = jnp.argmax(log_probs, axis=-1).astype("int32")
            return ids, out.at[:, i].set(ids), caches

        start = jnp.full((rows,), START_ID, "int32")
        out = jnp.zeros((rows, GENERATED), "int32")
        return jax.lax.fori_loop(0, GENERATED, body, (start, out, caches))[1]

    @jax.jit
    def beam4(source_ids):
        constant, caches = prepare(source_ids, BEAMS)
        rows = source_ids.shape[0]

        def body(i, carry):
            ids, scores, out, caches = carry
            log_probs, caches = step(constant, ids, i, caches)  # [rows * beams, vocab]
            total = (scores[:, :, None] + log_probs.reshape(rows, BEAMS, -1)).reshape(rows, -1)
            scores, flat = jax.lax.top_k(total, BEAMS)  # [rows, beams]
            beam, ids = flat // VOCAB, (flat % VOCAB).astype("int32")
            # The hypotheses and their caches follow the beams they extend.
            index = (jnp.arange(rows)[:, None] * BEAMS + beam).reshape(-1)
            caches = jax.tree.map(lambda t: jnp.take(t, index, axis=0), caches)
            out = jnp.take(out, index, axis=0).at[:, i].set(ids.reshape(-1))
            return ids.reshape(-1), scores, out, caches

        start = jnp.full((rows * BEAMS,), START_ID, "int32")
        scores = jnp.tile(jnp.array([[0.0] + [-1e9] * (BEAMS - 1)]), (rows, 1))
        out = jnp.zeros((rows * BEAMS, GENERATED), "int32")
        return jax.lax.fori_loop(0, GENERATED, body, (start, scores, out, caches))[2]

    return {"beam4": beam4, "greedy": greedy}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    import jax
    import numpy as np

    model = random_small_model()
    rng = np.random.default_rng(0)
    results = {}
    for name, search in _searches(model).items():
        for batch in (1, 32):
            source_ids = jax.numpy.asarray(rng.integers(4, VOCAB, (batch, SOURCE_LENGTH)), "int32")
            search(source_ids).block_until_ready()  # compiles
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                search(source_ids).block_until_ready()
                times.append(time.perf_counter() - start)
            results[f"{name} {batch}"] = round(1000 * float(np.median(times)), 1)
            print(f"{name} batch {batch}: {results[f'{name} {batch}']} ms", flush=True)
    print(f"jax {jax.__version__}, {jax.devices()[0].platform} (ms):", results)


if __name__ == "__main__":
    main()
