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
engine in a fresh process of its own. `--threads N` runs everything on N
threads: TensorFlow's intra-op pool and CTranslate2's `intra_threads`
(default: the machine's CPUs, TensorFlow's own choice; CTranslate2 gets
`inter_threads=1`).

    .venv/bin/pip install -e '.[benchmark]'
    .venv/bin/python benchmarks/decode_peers.py [--repeats 5] [--data DIR] [--threads N]
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

from multi30k_data import add_data_argument

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATED = 32
CASES = (("beam4", 4, 1), ("greedy", 1, 1), ("beam4", 4, 32), ("greedy", 1, 32))


def ct2_times(model_dir, sentences, repeats, threads):
    """Median ms of CTranslate2 on `sentences`, per case. Imports no
    TensorFlow: run it in a process of its own."""
    import ctranslate2
    import numpy as np
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

        def run(batch=batch, beams=beams):
            pieces = source.encode(sentences[:batch], out_type=str)
            out = translator.translate_batch(
                pieces, beam_size=beams, max_decoding_length=GENERATED, max_batch_size=batch
            )
            return [target.decode(r.hypotheses[0]) for r in out], [
                len(r.hypotheses[0]) for r in out
            ]

        lengths = set(run()[1])
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        results[f"{name} {batch}"] = float(np.median(times)) * 1000
        results[f"{name} {batch} pieces"] = sorted(lengths)
    return results


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
        for engine in ("ct2 float32", "ct2 int8"):
            ms[engine] = in_fresh_process(
                "decode_peers", "ct2_times", paths[engine], sentences, args.repeats, args.threads
            )
            print(engine, ms[engine], flush=True)
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


if __name__ == "__main__":
    main()
