"""Decoding latency of the `small` preset: exported SavedModel vs keras-hub.

Ours: the `serving_default` (beam 4) and `translate_greedy` signatures of an
export, run through the session loader TF Serving uses (no XLA), strings in
and out, tokenization included. keras-hub: `BeamSampler(num_beams=4)` and
`GreedySampler` over the cached `TransformerDecoder` of the same
architecture, with and without `jit_compile`. Every run generates exactly
32 tokens (the end token is disabled), at batch 1 and 32, with 8,000-piece
vocabularies on both sides; our inputs are Multi30k test sentences.

The same run measures the floor of `decode_floor.py` (the 25 matrix
products of a step, float32, 32 steps in a session loop: 4 rows for beam 4
at batch 1, 1 row for greedy) and prints our batch-1 latency over it on
lines of their own:

    beam4_batch1_vs_floor: X.XX
    greedy_batch1_vs_floor: X.XX

It also measures what no decoder step can remove, and prints the ratio a
step made of nothing but its matrix products would reach (`..._bound_vs_floor`):
the latency of a one-token request (tokenizers, encoder, set-up and one
real step), plus, for each of the other 31 steps, the floor's products and
`decode_floor.py`'s search alone (the same search around a table lookup).

Where the export has `translate_prefix`, beam 4 through it with an empty
target prefix is timed too (`beam4 prefix`), and its ratio to
`serving_default` printed (`..._empty_prefix_vs_translate`).

Every session is timed in a fresh process in which no eager op has run,
as in TF Serving. `--threads INTRA,INTER` runs our export's session with
those thread pools, as TF Serving's `--tensorflow_intra_op_parallelism` and
`--tensorflow_inter_op_parallelism` do (default `0,0`: TensorFlow's own
choice, what TF Serving starts with). The floor and the search alone always
run with TensorFlow's defaults, the fastest floor this machine shows.

    .venv/bin/pip install keras-hub
`--jit-compile` times the `--jit-compile` export of the same weights too
(after the plain one, in a fresh process of its own; each shape is run
once before it is timed, as the export's warmup does), prints its speed-up
over the plain export, and its ratios to the floor on the lines above.

    .venv/bin/python benchmarks/decode_latency.py [--repeats 5] [--data DIR] [--ours-only] \
        [--threads INTRA,INTER] [--jit-compile]

A before-and-after: export the same weights with each commit's library
(`--export-to DIR [--jit-compile]`, run from each checkout), then time the
exports in turns, fresh processes, one machine (`--compare DIR1 DIR2
[--rounds 5]`); each case's median, and its ratio to the first side.
"""

import argparse
import functools
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

from multi30k_data import add_data_argument

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from small_model import (  # noqa: E402
    D_MODEL,
    DFF,
    GENERATED,
    HEADS,
    LAYERS,
    SOURCE_LENGTH,
    VOCAB,
    random_small_model,
)


def _timed(fn, repeats):
    fn()  # warm up (tracing, compilation)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1000


def _read_lines(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


@functools.cache
def _tokenizers(data_dir):
    from keras_transformer.data.tokenizer import SubwordTokenizer

    # Real sentences and 8,000-piece vocabularies (keras-hub's side uses the
    # same vocabulary size), learned from Multi30k's training text.
    source = SubwordTokenizer.train(_read_lines(os.path.join(data_dir, "train.en.gz")), VOCAB)
    target = SubwordTokenizer.train(_read_lines(os.path.join(data_dir, "train.de.gz")), VOCAB)
    return source, target


def small_model(data_dir):
    """`random_small_model` with Multi30k tokenizers' vocabularies, the
    tokenizers, and the first 32 Multi30k test sentences: `(model, source,
    target, sentences)`."""
    source, target = _tokenizers(data_dir)
    sentences = _read_lines(os.path.join(data_dir, "test_2016_flickr.en.gz"))[:32]
    model = random_small_model(source.vocab_size, target.vocab_size)
    return model, source, target, sentences


# The compiled export's shapes here: batches of 1 and 32, and the default
# lengths (16, 32, 64, ...; the test sentences take 32 and 64 tokens).
JIT_OPTIONS = dict(jit_compile=True, batch_sizes=(1, 32))


def export_small(data_dir, base, generated=GENERATED, jit_compile=False):
    """Exports `small_model` under `base`.

    Args:
        data_dir: the Multi30k directory.
        base: the export's base directory.
        generated: tokens every request generates.
        jit_compile: a `--jit-compile` export (`JIT_OPTIONS`).

    Returns:
        `(export path, the first 32 Multi30k test sentences)`.
    """
    from keras_transformer.export import export_version

    model, source, target, sentences = small_model(data_dir)
    options = JIT_OPTIONS if jit_compile else {}
    path = export_version(
        model,
        source,
        target,
        base,
        max_output_length=generated,
        beam_size=4,
        check=False,
        **options,
    )
    return path, sentences


SIGNATURES = (("beam4", "serving_default"), ("greedy", "translate_greedy"))
# Beam 4 continuing an empty target prefix: a plain translation through the
# prefix signature, timed where the export has it.
PREFIX_SIGNATURE = ("beam4 prefix", "translate_prefix")


def time_signatures(served, sentences, repeats):
    """Median ms of each search's signature of `served` on `sentences`."""
    text = np.array([s.encode() for s in sentences], dtype=object)
    cases = [(name, signature, {"text": text}) for name, signature in SIGNATURES]
    if PREFIX_SIGNATURE[1] in served.signatures:
        empty = np.array([b""] * len(sentences), dtype=object)
        cases.append((*PREFIX_SIGNATURE, {"text": text, "target_prefix": empty}))
    return {
        name: _timed(lambda: served.run(signature, inputs), repeats)
        for name, signature, inputs in cases
    }


def open_session(path, threads):
    """The export at `path` in a `SessionModel` with `threads` = `[intra,
    inter]` (0: TensorFlow's choice)."""
    try:
        from keras_transformer.runtime import SessionModel
    except ImportError:  # a commit before runtime/, timed for a before-and-after
        from keras_transformer.export import SessionModel

    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=threads[0], inter_op_parallelism_threads=threads[1]
    )
    return SessionModel(path, config=config)


def session_times(path, sentences, repeats, threads, batches):
    """`{"beam4 BATCH": ms, "greedy BATCH": ms}` of the export at `path`,
    its session opened by `open_session`."""
    served = open_session(path, threads)
    results = {}
    for batch in batches:
        for name, ms in time_signatures(served, sentences[:batch], repeats).items():
            results[f"{name} {batch}"] = ms
    served.close()
    return results


def floor_times(repeats):
    """`decode_floor.py`'s matmul floor and search alone at batch 1, with
    TensorFlow's default threads: `{"beam4 floor": ms, "beam4 search": ms, ...}`."""
    import decode_floor

    assert (decode_floor.LAYERS, decode_floor.D_MODEL, decode_floor.DFF) == (LAYERS, D_MODEL, DFF)
    assert decode_floor.STEPS == GENERATED
    results = {}
    for name, beams in (("beam4", 4), ("greedy", 1)):
        results[f"{name} floor"] = decode_floor._session_ms(
            decode_floor.matmuls(beams, tf.float32), 3 * repeats
        )
        results[f"{name} search"] = decode_floor._session_ms(
            decode_floor.search(1, beams), 3 * repeats
        )
    return results


_CHILD = """
import importlib, json, sys
sys.path[:0] = json.loads(sys.argv[1])
function = getattr(importlib.import_module(sys.argv[2]), sys.argv[3])
print("RESULT " + json.dumps(function(*json.loads(sys.argv[4]))))
"""


def in_fresh_process(module, function, *args):
    """`function(*args)` of the benchmark `module`, run in a new Python
    process; its result travels back as JSON.

    Sessions are timed where no eager op has run, as in TF Serving: an eager
    op fixes thread pools that the sessions started after it then share
    (measured: one thread each way took 72.6 ms at beam 4 after an eager op,
    63.8 ms without one).
    """
    here = os.path.dirname(os.path.abspath(__file__))
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps([here, os.path.dirname(here)]), module,
         function, json.dumps(args)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"{function} failed:\n{result.stderr[-3000:]}")
    line = [x for x in result.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def ours(repeats, data_dir, threads=(0, 0), jit_compile=False):
    base = tempfile.mkdtemp()
    try:
        path, sentences = export_small(data_dir, base, jit_compile=jit_compile)
        results = in_fresh_process(
            "decode_latency", "session_times", path, sentences, repeats, threads, [1, 32]
        )
        # The same weights (same seed), generating one token: what a request
        # costs besides its steps, plus one step.
        path, _ = export_small(
            data_dir, os.path.join(base, "one_token"), generated=1, jit_compile=jit_compile
        )
        one = in_fresh_process(
            "decode_latency", "session_times", path, sentences, repeats, threads, [1]
        )
        for name, _ in SIGNATURES:
            results[f"{name} one token"] = one[f"{name} 1"]
        return results
    finally:
        shutil.rmtree(base, ignore_errors=True)


def export_for_comparison(folder, data_dir, jit_compile):
    """Writes `folder/plain` (and `folder/compiled`) with this checkout's
    library, for `compare`."""
    path, _ = export_small(data_dir, os.path.join(folder, "plain"))
    print(path)
    if jit_compile:
        path, _ = export_small(data_dir, os.path.join(folder, "compiled"), jit_compile=True)
        print(path)


def compare(folders, data_dir, repeats, threads, rounds):
    """Times the exports under each of `folders` (`export_for_comparison`'s)
    in turns, a fresh process each, `rounds` times: the machine's drift
    over minutes (20% here) falls on every side alike. Prints the median
    of each case, and each side over the first."""
    _, _, _, sentences = small_model(data_dir)
    exports = {}
    for folder in folders:
        for kind in ("plain", "compiled"):
            versions = os.path.join(folder, kind)
            if os.path.isdir(versions):
                latest = max(int(v) for v in os.listdir(versions) if v.isdigit())
                exports[(folder, kind)] = os.path.join(versions, str(latest))
    times = {key: [] for key in exports}
    for _ in range(rounds):
        for key, path in exports.items():
            times[key].append(in_fresh_process(
                "decode_latency", "session_times", path, sentences, repeats, threads, [1, 32]
            ))  # fmt: skip
    medians = {key: {case: float(np.median([run[case] for run in runs if case in run]))
                     for case in runs[0]} for key, runs in times.items()}  # fmt: skip
    for kind in ("plain", "compiled"):
        sides = [key for key in medians if key[1] == kind]
        if not sides:
            continue
        base = medians[sides[0]]
        for key in sides:
            cases = ", ".join(
                f"{case} {ms:.1f} ms ({ms / base[case]:.3f}x)" if case in base
                else f"{case} {ms:.1f} ms" for case, ms in medians[key].items()
            )  # fmt: skip
            print(f"{kind} {key[0]}: {cases}")
        for key in sides:
            for batch in (1, 32):
                if f"beam4 prefix {batch}" in medians[key]:
                    ratio = medians[key][f"beam4 prefix {batch}"] / medians[key][f"beam4 {batch}"]
                    print(f"{kind} {key[0]} batch {batch} empty prefix / translate: {ratio:.3f}")


def keras_hub_side(repeats, jit):
    import keras_hub

    keras.utils.set_random_seed(0)
    embed_src = keras_hub.layers.TokenAndPositionEmbedding(VOCAB, 256, D_MODEL, mask_zero=True)
    embed_tgt = keras_hub.layers.TokenAndPositionEmbedding(VOCAB, 256, D_MODEL, mask_zero=True)
    encoders = [keras_hub.layers.TransformerEncoder(DFF, HEADS) for _ in range(LAYERS)]
    decoders = [keras_hub.layers.TransformerDecoder(DFF, HEADS) for _ in range(LAYERS)]
    head = keras.layers.Dense(VOCAB)
    head_dim = D_MODEL // HEADS
    # Build every layer (the decoders create cross-attention on first call).
    memory = embed_src(np.ones((1, SOURCE_LENGTH), "int32"))
    for layer in encoders:
        memory = layer(memory)
    hidden = embed_tgt(np.ones((1, 2), "int32"))
    for layer in decoders:
        hidden = layer(hidden, memory)
    head(hidden)
    results = {}
    for batch in (1, 32):
        context = (
            np.random.default_rng(0).integers(4, VOCAB, (batch, SOURCE_LENGTH)).astype("int32")
        )
        total = GENERATED + 1

        def generate(sampler, context=context, batch=batch):
            x = embed_src(context)
            for layer in encoders:
                x = layer(x)
            prompt = tf.concat(
                [tf.fill([batch, 1], 2), tf.zeros([batch, total - 1], tf.int32)], axis=1
            )
            self_cache = tf.zeros([batch, LAYERS, 2, total, HEADS, head_dim])

            def project(dense):  # [batch, source_length, heads, head_dim]
                return tf.reshape(dense(x), [batch, -1, HEADS, head_dim])

            # Cross-attention keys/values computed once, as in keras-hub's BART.
            cross_cache = tf.stack(
                [
                    tf.stack(
                        [
                            project(d._cross_attention_layer._key_dense),
                            project(d._cross_attention_layer._value_dense),
                        ],
                        axis=1,
                    )
                    for d in decoders
                ],
                axis=1,
            )  # [batch, layers, 2, source_length, heads, head_dim]

            def next_fn(prompt, cache, index):
                self_cache, cross_cache = cache[:, 0], cache[:, 1]
                beams = tf.shape(prompt)[0] // batch
                memory = tf.repeat(x, beams, axis=0)  # the sampler tiles only the cache
                token = prompt[:, index - 1 : index]
                y = embed_tgt(token, start_index=index - 1)
                caches = []
                for i, layer in enumerate(decoders):
                    y, new_self, _ = layer(
                        y,
                        memory,
                        self_attention_cache=self_cache[:, i],
                        self_attention_cache_update_index=index - 1,
                        cross_attention_cache=cross_cache[:, i],
                        cross_attention_cache_update_index=None,
                    )
                    caches.append(new_self)
                logits = head(y)[:, 0]
                logits = logits - 1e9 * tf.one_hot(3, VOCAB)  # never end: exactly GENERATED tokens
                return logits, None, tf.stack([tf.stack(caches, axis=1), cross_cache], axis=1)

            # One cache tensor [batch, 2 (self, cross), layers, 2, ...]; source
            # and target lengths are padded to the same size for stacking.
            pad = total - SOURCE_LENGTH
            padded_cross = tf.pad(cross_cache, [[0, 0], [0, 0], [0, 0], [0, pad], [0, 0], [0, 0]])
            cache = tf.stack([self_cache, padded_cross], axis=1)
            return sampler(
                next_fn,
                prompt,
                cache=cache,
                index=1,
                mask=tf.concat([tf.ones([batch, 1], bool), tf.zeros([batch, total - 1], bool)], 1),
                stop_token_ids=None,
            )

        for name, sampler in (
            ("beam4", keras_hub.samplers.BeamSampler(num_beams=4)),
            ("greedy", keras_hub.samplers.GreedySampler()),
        ):
            fn = tf.function(lambda s=sampler: generate(s), jit_compile=jit)
            try:
                results[(name, batch)] = _timed(fn, repeats)
            except Exception as error:  # report it and go on with the others
                traceback.print_exc()
                print(f"keras-hub {name} batch {batch} jit={jit} failed: {error!r}", flush=True)
                results[(name, batch)] = float("nan")
            print(
                f"keras-hub {name} batch {batch} jit={jit}: {results[(name, batch)]:.1f} ms",
                flush=True,
            )
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    add_data_argument(parser)
    parser.add_argument("--ours-only", action="store_true", help="skip the keras-hub half")
    parser.add_argument(
        "--threads",
        default="0,0",
        help="intra-op,inter-op threads of our export's session (0: TensorFlow's choice)",
    )
    parser.add_argument(
        "--jit-compile",
        action="store_true",
        help="also time the --jit-compile export; the ratio lines are then its own",
    )
    parser.add_argument(
        "--export-to",
        metavar="DIR",
        help="only export the small model (plain, and compiled with --jit-compile) under DIR, "
        "for --compare",
    )
    parser.add_argument(
        "--compare",
        nargs="+",
        metavar="DIR",
        help="time the exports written by --export-to (under each DIR, by any commit) "
        "in turns, --rounds times, and print each case's median: a before-and-after",
    )
    parser.add_argument("--rounds", type=int, default=5, help="turns of --compare")
    args = parser.parse_args()
    threads = [int(n) for n in args.threads.split(",")]
    if args.export_to:
        return export_for_comparison(args.export_to, args.data, args.jit_compile)
    if args.compare:
        return compare(args.compare, args.data, args.repeats, threads, args.rounds)
    print(f"our session's threads: intra-op {threads[0]}, inter-op {threads[1]}")
    ours_ms = ours(args.repeats, args.data, threads)
    print("ours (ms):", {k: round(v, 1) for k, v in ours_ms.items()}, flush=True)
    if args.jit_compile:
        plain_ms = ours_ms
        ours_ms = ours(args.repeats, args.data, threads, jit_compile=True)
        print("ours --jit-compile (ms):", {k: round(v, 1) for k, v in ours_ms.items()})
        for name in ("beam4", "greedy"):
            for batch in (1, 32):
                key = f"{name} {batch}"
                print(f"{name}_batch{batch}_jit_speedup_vs_plain: "
                      f"{plain_ms[key] / ours_ms[key]:.2f}")  # fmt: skip
    for label, times in (("plain", plain_ms if args.jit_compile else ours_ms),
                         ("jit", ours_ms if args.jit_compile else None)):  # fmt: skip
        for batch in (1, 32):
            if times and f"beam4 prefix {batch}" in times:
                ratio = times[f"beam4 prefix {batch}"] / times[f"beam4 {batch}"]
                print(f"{label}_batch{batch}_empty_prefix_vs_translate: {ratio:.3f}")
    floors = in_fresh_process("decode_latency", "floor_times", args.repeats)
    for name in ("beam4", "greedy"):
        floor, search = floors[f"{name} floor"], floors[f"{name} search"]
        one_token = ours_ms[f"{name} one token"]
        bound = one_token + (GENERATED - 1) * (floor + search) / GENERATED
        print(f"{name} batch 1 floor (ms): {floor:.1f}")
        print(f"{name} batch 1 search alone (ms): {search:.1f}")
        print(f"{name} batch 1, one generated token (ms): {one_token:.1f}")
        print(f"{name}_batch1_vs_floor: {ours_ms[f'{name} 1'] / floor:.2f}")
        print(f"{name}_batch1_bound_vs_floor: {bound / floor:.2f}", flush=True)
    if args.ours_only:
        return
    hub = {jit: keras_hub_side(args.repeats, jit) for jit in (False, True)}
    print(
        "| search | batch | ours, SavedModel (ms) | keras-hub (ms) | keras-hub XLA (ms) "
        "| speed-up vs XLA |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for name in ("beam4", "greedy"):
        for batch in (1, 32):
            a, b, c = (
                ours_ms[f"{name} {batch}"],
                hub[False][(name, batch)],
                hub[True][(name, batch)],
            )
            print(f"| {name} | {batch} | {a:.1f} | {b:.1f} | {c:.1f} | {c / a:.2f}x |")


if __name__ == "__main__":
    main()
