"""Our exports against CTranslate2 on the same weights and the same work.

One run times, on the `small` preset of `decode_latency.py` (random
weights, the end token disabled so that every request generates exactly
32 tokens; 8,000-piece vocabularies; Multi30k test sentences as inputs):

- the plain export (`serving_default` and `translate_greedy`, TensorFlow's
  session, as TF Serving runs it);
- the `--jit-compile` export (the same, its functions compiled with XLA,
  every shape run once before timing, as its warmup does);
- CTranslate2 float32 and int8 (`export --format ctranslate2`), beam 4 and
  greedy (`translate_batch`, `max_decoding_length=32`), in a process that
  never loads TensorFlow (loaded, it slows CTranslate2's float32 path
  several times); SentencePiece tokenization and detokenization are timed
  with it, as ours are inside the signatures.

Beam 4 and greedy, batches of 1 and 32; median of `--repeats` runs, each
engine in a fresh process of its own. A second table splits batch 1 into
what a request generating one token costs (tokenization, encoder, the
first step) and what each further token adds, for the XLA export (an
export of the same weights generating one token) and CTranslate2 float32
(`max_decoding_length=1`). `--threads N` runs everything on N
threads: TensorFlow's intra-op pool and CTranslate2's `intra_threads`
(default: the machine's CPUs, TensorFlow's own choice; CTranslate2 gets
`inter_threads=1`).

    .venv/bin/pip install -e '.[benchmark]'
    .venv/bin/python benchmarks/decode_peers.py [--repeats 5] [--data DIR] [--threads N]
"""

import argparse
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time

from multi30k_data import add_data_argument

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATED = 32
CASES = (("beam4", 4, 1), ("greedy", 1, 1), ("beam4", 4, 32), ("greedy", 1, 32))
# One-token requests are short and their times spread widely (CTranslate2's
# fell at about 1.1 and at about 4 ms, run to run): more of them, and their
# minimum printed beside the median.
ONE_TOKEN_REPEATS = 3


def ct2_times(model_dir, sentences, repeats, threads):
    """Median ms of CTranslate2 on `sentences`, per case. Imports no
    TensorFlow: run it in a process of its own."""
    import ctranslate2
    import sentencepiece

    assert "tensorflow" not in sys.modules
    source = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(model_dir, "source.model")
    )
    target = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(model_dir, "target.model")
    )
    translator = ctranslate2.Translator(
        model_dir, device="cpu", inter_threads=1, intra_threads=threads
    )
    results = {}
    for name, beams, batch in CASES:

        def run(batch=batch, beams=beams, tokens=GENERATED):
            pieces = source.encode(sentences[:batch], out_type=str)
            out = translator.translate_batch(
                pieces, beam_size=beams, max_decoding_length=tokens, max_batch_size=batch
            )
            return [target.decode(r.hypotheses[0]) for r in out], [
                len(r.hypotheses[0]) for r in out
            ]

        lengths = set(run()[1])
        results[f"{name} {batch}"] = _median_ms(run, repeats)
        results[f"{name} {batch} pieces"] = sorted(lengths)
        if batch == 1:
            one = functools.partial(run, tokens=1)
            one()
            results[f"{name} 1 one token"] = _times_ms(one, ONE_TOKEN_REPEATS * repeats)
    return results


def one_token_times(path, sentences, repeats, threads):
    """`{"beam4": ms, "greedy": ms}`: each search's signature of the export
    at `path` (one that generates one token) on the first sentence, every
    time, with `threads` as `session_times` takes them."""
    import numpy as np
    from decode_latency import SIGNATURES, open_session

    served = open_session(path, threads)
    text = np.array([sentences[0].encode()], dtype=object)
    results = {}
    for name, signature in SIGNATURES:
        run = functools.partial(served.run, signature, {"text": text})
        run()
        results[name] = _times_ms(run, ONE_TOKEN_REPEATS * repeats)
    served.close()
    return results


def _times_ms(run, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return times


def _median_ms(run, repeats):
    return statistics.median(_times_ms(run, repeats))


def export_all(data_dir, base):
    """The plain, compiled and CTranslate2 (float32, int8) exports of one
    model; returns their paths and the sentences."""
    sys.path.insert(0, HERE)
    import decode_latency

    from keras_transformer.export import export_version
    from keras_transformer.export.ctranslate2 import export_ctranslate2

    model, source, target, sentences = decode_latency.small_model(data_dir)
    common = dict(max_length=GENERATED, beam_size=4, check=False)
    paths = {
        "plain": export_version(model, source, target, os.path.join(base, "plain"), **common),
        "xla": export_version(
            model,
            source,
            target,
            os.path.join(base, "xla"),
            **common,
            **decode_latency.JIT_OPTIONS,
        ),  # fmt: skip
        # The same weights, generating one token: a request's cost besides
        # its further steps.
        "xla one token": export_version(
            model,
            source,
            target,
            os.path.join(base, "xla_one_token"),
            **{**common, "max_length": 1},
            **decode_latency.JIT_OPTIONS,
        ),
    }
    for quantization in ("float32", "int8"):
        paths[f"ct2 {quantization}"] = export_ctranslate2(
            model, source, target, os.path.join(base, f"ct2-{quantization}"), quantization
        )
    return paths, sentences


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    add_data_argument(parser)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    # Its children run each engine; this process loads TensorFlow, none of them does.
    from decode_latency import in_fresh_process

    base = tempfile.mkdtemp()
    try:
        paths, sentences = in_fresh_process("decode_peers", "export_all", args.data, base)
        threads = [args.threads, 0]
        ms = {}
        for engine in ("plain", "xla"):
            ms[engine] = in_fresh_process(
                "decode_latency", "session_times", paths[engine], sentences, args.repeats,
                threads, [1, 32],
            )  # fmt: skip
            print(engine, {k: round(v, 1) for k, v in ms[engine].items()}, flush=True)
        one = in_fresh_process(
            "decode_peers", "one_token_times", paths["xla one token"], sentences, args.repeats,
            threads,
        )  # fmt: skip
        for name in ("beam4", "greedy"):
            ms["xla"][f"{name} 1 one token"] = one[name]
        for engine in ("ct2 float32", "ct2 int8"):
            ms[engine] = in_fresh_process(
                "decode_peers", "ct2_times", paths[engine], sentences, args.repeats, args.threads
            )
            print(engine, {k: v for k, v in ms[engine].items() if "one token" not in k}, flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\nthreads: {args.threads}; {GENERATED} tokens generated per sentence")
    print("| case | plain (ms) | XLA (ms) | CT2 float32 (ms) | CT2 int8 (ms) "
          "| XLA vs plain | XLA vs CT2 float32 | XLA vs CT2 int8 |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, _, batch in CASES:
        key = f"{name} {batch}"
        plain, xla, f32, int8 = (ms[e][key] for e in ("plain", "xla", "ct2 float32", "ct2 int8"))
        print(f"| {name}, batch {batch} | {plain:.1f} | {xla:.1f} | {f32:.1f} | {int8:.1f} "
              f"| {plain / xla:.2f}x | {xla / f32:.2f} | {xla / int8:.2f} |")  # fmt: skip
    print(f"\nBatch 1 split: a request generating one token (median / minimum of "
          f"{ONE_TOKEN_REPEATS * args.repeats}), and each further token (medians)")  # fmt: skip
    print("| batch 1 | XLA, one token (ms) | CT2 float32, one token (ms) "
          "| XLA, each further token (ms) | CT2 float32, each further token (ms) |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    for name in ("beam4", "greedy"):
        cells = []
        for engine in ("xla", "ct2 float32"):
            one = ms[engine][f"{name} 1 one token"]
            cells.append(f"{statistics.median(one):.2f} / {min(one):.2f}")
        for engine in ("xla", "ct2 float32"):
            one = statistics.median(ms[engine][f"{name} 1 one token"])
            cells.append(f"{(ms[engine][f'{name} 1'] - one) / (GENERATED - 1):.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
