"""Throughput of `keras-transformer corpus`: one process against Ray's and Beam's workers.

Translates the same Multi30k sentences (the first `--lines` of the
training set's English side, repeated if it is shorter) with an export:

- `local`: `corpus --engine local`, one process, one model;
- `ray 1`: `--engine ray` on a Ray cluster of one node of one CPU, one
  model holder;
- `ray 2`: on a cluster of two nodes of one CPU each, two holders;
- `beam1`, `beam2`: `--engine beam` on Beam's DirectRunner with one and
  two worker processes (`--direct_running_mode multi_processing`);
- `local1`, `local2`: one and two `corpus --engine local --worker-threads
  1` processes side by side, each on its share of the lines, no engine:
  what two workers of one thread can give on this machine, against which
  Ray's and Beam's scaling is read.

Each run is a fresh `keras-transformer corpus` process (its model loads
included; its start is timed apart, on a one-line corpus), on a loopback
cluster (`tests/corpus/cluster.py`, 127.0.0.2 and .3). Prints, per engine,
the seconds, sentences per second with and without the start, and the
scaling from one worker to two. `--xla-cache-dir DIR` gives every job
`corpus --xla-cache-dir DIR` (a `--jit-compile` export's programs kept
there, read back by later jobs); `--fresh-xla-cache` gives each engine an
empty one of its own, so that its workers share the programs compiled
within its job but none from before. The corpus and the outputs live in a
temporary folder, deleted at the end.

    .venv/bin/python benchmarks/corpus.py --model exports/demo --data "$DATA" \\
        [--lines 10000] [--engines local,local1,local2,ray1,ray2,beam1,beam2] \\
        [--max-batch-size 64] \\
        [--xla-cache-dir DIR | --fresh-xla-cache]
"""

import argparse
import contextlib
import gzip
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from multi30k_data import add_data_argument  # noqa: E402

ENGINES = {"local": ("local", 0), "local1": ("local", 1), "local2": ("local", 2),
           "ray1": ("ray", 1), "ray2": ("ray", 2),
           "beam1": ("beam", 1), "beam2": ("beam", 2)}  # fmt: skip


def _sentences(data, lines):
    with gzip.open(os.path.join(data, "train.en.gz"), "rt", encoding="utf-8") as f:
        text = [line.rstrip("\n") for line in f]
    return [text[i % len(text)] for i in range(lines)]


def _job(model, path, output, engine, workers, address, max_batch_size, xla_cache_dir):
    """Seconds of one job; `local` with `workers` runs that many processes
    of one thread each, side by side, each on its share of the lines."""
    command = [sys.executable, "-m", "keras_transformer.cli", "corpus", "--model", model,
               "--engine", engine, "--max-batch-size", str(max_batch_size)]  # fmt: skip
    if xla_cache_dir:
        command += ["--xla-cache-dir", xla_cache_dir]
    if engine == "ray":
        command += ["--ray-address", address, "--workers", str(workers)]
    if engine == "beam":
        command += ["--runner", "DirectRunner", "--direct_num_workers", str(workers),
                    "--direct_running_mode", "multi_processing"]  # fmt: skip
    if engine == "local" and workers:
        command += ["--worker-threads", "1"]
        parts = _split(path, workers)
    else:
        parts = [path]
    # Each process logs to a file: a pipe read after another process's end
    # could fill and stop it.
    logs = [open(f"{output}-{i}.log", "w+", encoding="utf-8") for i in range(len(parts))]
    began = time.monotonic()
    processes = [
        subprocess.Popen(command + ["--input", part, "--output", f"{output}-{i}"], cwd=REPO,
                         stdout=subprocess.DEVNULL, stderr=log)
        for i, (part, log) in enumerate(zip(parts, logs))
    ]  # fmt: skip
    for process in processes:
        process.wait()
    seconds = time.monotonic() - began
    for process, log in zip(processes, logs):
        log.seek(0)
        error = log.read()
        log.close()
        if process.returncode != 0:
            raise SystemExit(f"{engine}: {error[-2000:]}")
    return seconds


def _split(path, parts):
    """`path`'s lines in `parts` files of consecutive lines (a one-line
    file is given whole to each)."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    size = -(-len(lines) // parts)
    paths = []
    for i in range(parts):
        share = lines[i * size : (i + 1) * size] if len(lines) > 1 else lines
        paths.append(f"{path}.part{i}")
        with open(paths[-1], "w", encoding="utf-8") as f:
            f.writelines(share)
    return paths


def main():
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--model", required=True, help="an export base or version directory")
    add_data_argument(parser)
    parser.add_argument("--lines", type=int, default=10_000, help="sentences translated")
    parser.add_argument("--engines", default="local,local1,local2,ray1,ray2,beam1,beam2",
                        help=f"comma-separated, of {', '.join(ENGINES)}")  # fmt: skip
    parser.add_argument("--max-batch-size", type=int, default=64)
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument("--xla-cache-dir", help="the XLA cache every job uses (default: none)")
    cache.add_argument(
        "--fresh-xla-cache",
        action="store_true",
        help="an empty XLA cache for each engine, shared by its workers",
    )
    args = parser.parse_args()
    engines = args.engines.split(",")
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        parser.error(f"unknown engines {unknown}; choose from {list(ENGINES)}")

    with tempfile.TemporaryDirectory(prefix="corpus_bench_") as folder:
        rows = _run_engines(args, engines, folder)
    _report(args, rows)


def _run_engines(args, engines, folder):
    from tests.corpus.cluster import loopback_cluster

    corpus, one = os.path.join(folder, "corpus.en"), os.path.join(folder, "one.en")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(_sentences(args.data, args.lines)) + "\n")
    with open(one, "w", encoding="utf-8") as f:
        f.write("A dog runs.\n")
    rows = {}
    for name in engines:
        engine, nodes = ENGINES[name]
        cache = args.xla_cache_dir
        if args.fresh_xla_cache:
            cache = os.path.join(folder, f"{name}-xla-cache")
        cluster = loopback_cluster(nodes=nodes, cpus=1) if engine == "ray" else None
        with cluster or contextlib.nullcontext() as address:
            workers = max(nodes, 1)
            start = _job(args.model, one, os.path.join(folder, f"{name}-start"), engine,
                         workers, address, args.max_batch_size, cache)  # fmt: skip
            whole = _job(args.model, corpus, os.path.join(folder, name), engine, workers,
                         address, args.max_batch_size, cache)  # fmt: skip
        rows[name] = (whole, start)
        print(f"{name}: {whole:.1f} s ({start:.1f} s of it the start)", flush=True)
    return rows


def _report(args, rows):
    print("| engine | seconds | sentences/s | sentences/s after the start |")
    print("| --- | --- | --- | --- |")
    for name, (whole, start) in rows.items():
        print(f"| {name} | {whole:.1f} | {args.lines / whole:.1f} "
              f"| {args.lines / max(whole - start, 1e-9):.1f} |")  # fmt: skip
    for engine in ("local", "ray", "beam"):
        if f"{engine}1" not in rows or f"{engine}2" not in rows:
            continue
        (one_whole, one_start), (two_whole, two_start) = rows[f"{engine}1"], rows[f"{engine}2"]
        print(
            f"{engine}: two workers / one: {one_whole / two_whole:.2f}x; after the start "
            f"{(one_whole - one_start) / (two_whole - two_start):.2f}x (target >= 1.6)"
        )


if __name__ == "__main__":
    main()
