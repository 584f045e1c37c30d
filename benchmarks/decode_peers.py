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

Beam 4 and greedy, batches of 1 and 32; median of `--repeats` runs. Each
engine runs in a process of its own, all loaded at once, and they take
turns: `TURN` timed requests each (after an untimed one), the order
rotating, so that a slow minute of the machine falls on every engine
rather than on the one that ran then. A second table splits batch 1 into
what a request generating one token costs (tokenization, encoder, the
first step) and what each further token adds, for the XLA export (an
export of the same weights generating one token) and CTranslate2 float32
(`max_decoding_length=1`).

`--threads 1,2` runs every engine on each thread count in turn (default:
one thread and the machine's CPUs): TensorFlow's intra-op and inter-op
pools and CTranslate2's `intra_threads` (CTranslate2 gets
`inter_threads=1`). One thread is what each request gets when a server
runs one request per core; the machine's CPUs, what one request alone
can use. A last table puts each engine at its fastest thread count, case
by case, since the engines do not all gain from the second thread
(CTranslate2 int8 lost 8x with it on a 2-vCPU machine:
`benchmarks/RESULTS.md`).

    .venv/bin/pip install -e '.[benchmark]'
    .venv/bin/python benchmarks/decode_peers.py [--repeats 5] [--data DIR] [--threads 1,2]
"""

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from multi30k_data import add_data_argument

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATED = 32
CASES = (("beam4", 4, 1), ("greedy", 1, 1), ("beam4", 4, 32), ("greedy", 1, 32))
BEAMS = {name: beams for name, beams, _ in CASES}
ENGINES = ("plain", "xla", "ct2 float32", "ct2 int8")
# One-token requests are short and their times spread widely (CTranslate2's
# fell at about 1.1 and at about 4 ms, run to run): more of them, and their
# minimum printed beside the median.
ONE_TOKEN_REPEATS = 3
# Timed requests an engine runs in one turn, after one untimed request
# that lets the engine before it go idle (CTranslate2's OpenMP threads
# spin for a while after their work).
TURN = 3


def _ct2_request(model_dir, threads):
    """`request(name, sentences, tokens)` translating with CTranslate2 at
    `model_dir`, SentencePiece included. Imports no TensorFlow."""
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

    def request(name, sentences, tokens):
        pieces = source.encode(sentences, out_type=str)
        out = translator.translate_batch(
            pieces, beam_size=BEAMS[name], max_decoding_length=tokens,
            max_batch_size=len(sentences),
        )  # fmt: skip
        assert {len(r.hypotheses[0]) for r in out} == {tokens}, "the end token came early"
        return [target.decode(r.hypotheses[0]) for r in out]

    return request


def _savedmodel_request(path, threads):
    """`request(name, sentences, tokens)` running the export at `path` in
    TensorFlow's session (its own length: `tokens` is the export's)."""
    import numpy as np
    from decode_latency import SIGNATURES, open_session

    # As many inter-op threads as intra-op: at one, the compiled export's
    # two programs of a batch run one after the other, on one core.
    served = open_session(path, [threads, threads])
    signatures = dict(SIGNATURES)

    def request(name, sentences, tokens):
        text = np.array([s.encode() for s in sentences], dtype=object)
        return served.run(signatures[name], {"text": text})

    return request


def serve_requests(engine, path, sentences, threads):
    """A worker's loop: loads `engine` (a SavedModel or "ct2") from `path`,
    prints READY, then for each stdin line "NAME BATCH TOKENS COUNT" runs
    that request COUNT times on the first BATCH sentences and prints their
    ms as "TIMES [...]". Runs until stdin closes."""
    make = _ct2_request if engine == "ct2" else _savedmodel_request
    request = make(path, threads)
    print("READY", flush=True)
    for line in sys.stdin:
        name, batch, tokens, count = line.split()
        run = functools.partial(request, name, sentences[: int(batch)], int(tokens))
        print("TIMES " + json.dumps(_times_ms(run, int(count))), flush=True)


_WORKER = """
import json, sys
sys.path[:0] = json.loads(sys.argv[1])
import decode_peers
decode_peers.serve_requests(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), int(sys.argv[5]))
"""


class Worker:
    """An engine in a process of its own, loaded once, timing requests on
    demand: engines take turns, so that a slow minute of the machine falls
    on all of them, not on whichever ran then."""

    def __init__(self, engine, path, sentences, threads, script=_WORKER, extra=()):
        # `script`: the child's code (another benchmark's own `serve`),
        # given the engine, path, sentences, threads and the `extra` arguments.
        self.process = subprocess.Popen(
            [sys.executable, "-c", script, json.dumps([HERE, os.path.dirname(HERE)]), engine,
             path, json.dumps(sentences), str(threads), *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self._read("READY")

    def _read(self, prefix):
        for line in self.process.stdout:
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        raise RuntimeError(f"a benchmark worker ended: exit code {self.process.wait()}")

    def times(self, name, batch, tokens, count):
        self.process.stdin.write(f"{name} {batch} {tokens} {count}\n")
        self.process.stdin.flush()
        return json.loads(self._read("TIMES "))

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def take_turns(workers, requests, repeats):
    """`{(engine, request): [ms, ...]}`, `repeats` timed runs of each
    request (`(name, batch, tokens)`) on each engine of `workers`, in
    turns of `TURN` after an untimed one; the engines' order rotates from
    turn to turn."""
    engines = list(workers)
    times = {(e, r): [] for e in engines for r in requests}
    for turn in range(-(-repeats // TURN)):
        order = engines[turn % len(engines) :] + engines[: turn % len(engines)]
        for request in requests:
            for engine in order:
                times[engine, request] += workers[engine].times(*request, TURN + 1)[1:]
    return {key: value[:repeats] for key, value in times.items()}


def _times_ms(run, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return times


def export_all(data_dir, base):
    """The plain, compiled and CTranslate2 (float32, int8) exports of one
    model; returns their paths and the sentences."""
    sys.path.insert(0, HERE)
    import decode_latency

    from keras_transformer.export import export_version
    from keras_transformer.export.ctranslate2 import export_ctranslate2

    model, source, target, sentences = decode_latency.small_model(data_dir)
    common = dict(max_output_length=GENERATED, beam_size=4, check=False)
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


def _thread_counts(text):
    """`--threads "1,2"` -> `[1, 2]`."""
    try:
        counts = sorted({int(part) for part in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of thread counts: {text!r}") from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"thread counts must be 1 or more: {text!r}")
    return counts


def measure(paths, sentences, threads, repeats):
    """`{engine: {request: ms}}` with every engine on `threads` threads:
    the median of each case, and the one-token requests' times."""
    workers = {}
    try:
        for engine in ENGINES:
            kind = "ct2" if engine.startswith("ct2") else "savedmodel"
            workers[engine] = Worker(kind, paths[engine], sentences, threads)
        requests = [(name, batch, GENERATED) for name, _, batch in CASES]
        times = take_turns(workers, requests, repeats)
        ms = {e: {f"{r[0]} {r[1]}": statistics.median(times[e, r]) for r in requests}
              for e in workers}  # fmt: skip
        for engine in workers:
            print(threads, engine, {k: round(v, 1) for k, v in ms[engine].items()}, flush=True)
        # The export of one token stands in for the XLA export's requests of
        # one; CTranslate2 float32 is asked for one token.
        for engine in ("plain", "xla", "ct2 int8"):
            workers.pop(engine).close()
        workers["xla"] = Worker("savedmodel", paths["xla one token"], sentences, threads)
        requests = [(name, 1, 1) for name in BEAMS]
        one = take_turns(workers, requests, ONE_TOKEN_REPEATS * repeats)
        for engine in workers:
            for name, batch, tokens in requests:
                ms[engine][f"{name} 1 one token"] = one[engine, (name, batch, tokens)]
    finally:
        for worker in workers.values():
            worker.close()
    return ms


def print_tables(ms, threads, repeats):
    """The comparison and the batch-1 split of one thread count."""
    print(f"\nthreads: {threads}; {GENERATED} tokens generated per sentence; engines "
          f"in turns of {TURN} requests")  # fmt: skip
    print("| case | plain (ms) | XLA (ms) | CT2 float32 (ms) | CT2 int8 (ms) "
          "| XLA vs plain | XLA vs CT2 float32 | XLA vs CT2 int8 |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, _, batch in CASES:
        key = f"{name} {batch}"
        plain, xla, f32, int8 = (ms[e][key] for e in ENGINES)
        print(f"| {name}, batch {batch} | {plain:.1f} | {xla:.1f} | {f32:.1f} | {int8:.1f} "
              f"| {plain / xla:.2f}x | {xla / f32:.2f} | {xla / int8:.2f} |")  # fmt: skip
    print(f"\nBatch 1 split: a request generating one token (median / minimum of "
          f"{ONE_TOKEN_REPEATS * repeats}), and each further token (medians)")  # fmt: skip
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


def print_best(by_threads):
    """Each engine at the thread count where it was fastest, case by case:
    how each would be deployed for the lowest latency."""
    print("\nEach engine at its fastest thread count (ms, threads)")
    print("| case | plain | XLA | CT2 float32 | CT2 int8 | XLA / CT2 float32 | XLA / CT2 int8 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, _, batch in CASES:
        key = f"{name} {batch}"
        best = {e: min((ms[e][key], t) for t, ms in by_threads.items()) for e in ENGINES}
        cells = [f"{best[e][0]:.1f} ({best[e][1]})" for e in ENGINES]
        ratios = [f"{best['xla'][0] / best[e][0]:.2f}" for e in ("ct2 float32", "ct2 int8")]
        print(f"| {name}, batch {batch} | " + " | ".join(cells + ratios) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    add_data_argument(parser)
    parser.add_argument(
        "--threads",
        type=_thread_counts,
        default=sorted({1, os.cpu_count()}),
        help="thread counts, comma-separated: every engine runs at each in turn "
        "(default: 1 and the machine's CPUs)",
    )
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    # This process loads TensorFlow (decode_latency imports it); each engine runs
    # in a child, and the CTranslate2 ones never import it (`_ct2_request` checks).
    from decode_latency import in_fresh_process

    base = tempfile.mkdtemp()
    try:
        paths, sentences = in_fresh_process("decode_peers", "export_all", args.data, base)
        by_threads = {t: measure(paths, sentences, t, args.repeats) for t in args.threads}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    for threads, ms in by_threads.items():
        print_tables(ms, threads, args.repeats)
    if len(by_threads) > 1:
        print_best(by_threads)


if __name__ == "__main__":
    main()
