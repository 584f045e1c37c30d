"""`keras-transformer corpus`: translate, n-best or score a corpus on an engine.

Every engine reads the same records (`records.iter_records`), checked
whole before any work, runs the same `CorpusModel` on
batches of them, and writes the same shards (`records.ShardWriter`); only
where the batches run differs:

- `local`: this process, one model, reading the corpus as it goes: it
  holds one window of `WINDOW` batches at a time, so a corpus of any size
  runs in constant memory;
- `ray`: Ray Data, `map_batches` over an actor pool of `--workers` model
  holders (one model loaded per actor), on the cluster of `--ray-address`,
  given the batches this process cuts, sorted by source length as the
  local engine's, the longest first.
  An actor that dies is restarted and its batch run again (Ray's task
  retries); the shards are written by the driver, whole or not at all.
- `beam`: Apache Beam's `RunInference` with a `ModelHandler` of our own
  (`corpus.beam`), on the runner its pipeline options name.

Ray and Beam take the records from this process (as Ray's `from_items`
and Beam's `Create` do) and hand the results back to it, which writes
them in input order: their corpus is held in this process's memory.

Example (`--engine local`):

>>> import os
>>> from keras_transformer.corpus.options import CorpusOptions
>>> path = os.path.join(tmp_dir, "lines.txt")
>>> _ = open(path, "w").write("The dog sleeps.\\n\\nThe cat sees the bird.\\n")
>>> summary = run_corpus(CorpusOptions(model=export_base, input=path,
...                                    output=os.path.join(tmp_dir, "out")))
>>> summary["records"], [r["line"] for r in read_shards(os.path.join(tmp_dir, "out"))]
(3, [0, 1, 2])
"""

import collections
import functools
import itertools
import json
import socket

from keras_transformer._validation import split_address
from keras_transformer.corpus.model import CorpusModel, length_sorted_batches
from keras_transformer.corpus.records import (
    ShardWriter,
    count_records,
    iter_records,
    read_records,
    read_shards,
)
from keras_transformer.runtime import xla_cache

__all__ = ["ray_dataset", "read_shards", "run_corpus"]

# The local engine's window, in batches: sorted by length within it (few
# padded tokens), written in input order once answered.
WINDOW = 8


def run_corpus(options):
    """Runs the job of `options` (`CorpusOptions`); returns a summary:
    `{"records": n, "shards": [paths], "rows_by_worker": {worker: rows}}`."""
    # Bad input fails before any work: the local engine streams the corpus,
    # so it is checked whole first; Ray and Beam take it whole from here.
    if options.xla_cache_dir is not None:
        xla_cache.enable(options.xla_cache_dir)  # a folder it cannot write fails here
    run = {"local": _run_local, "ray": _run_ray, "beam": _run_beam}[options.engine]
    if options.engine == "ray" and options.ray_address is not None:
        _check_answers(options.ray_address)  # before the corpus is read
    if options.engine == "beam":  # a mistyped flag fails before the corpus is read
        from keras_transformer.corpus.beam import checked_pipeline_options

        run = functools.partial(_run_beam, pipeline_options=checked_pipeline_options(
            options.beam_args))  # fmt: skip
    records = None
    if options.engine == "local":
        total = count_records(options.input, *options.paired)
    else:
        records = read_records(options.input, *options.paired)
        total = len(records)
    if not total:
        raise ValueError(f"--input {options.input!r} holds no line: every file it matches is empty")
    with ShardWriter(options.output, options.shards) as writer:
        rows_by_worker = run(records, options, writer)
        if writer.count != total:  # every line exactly once, or no output
            raise RuntimeError(f"The job answered {writer.count} of {total} records")
        paths = writer.close()
    return {"records": total, "shards": paths, "rows_by_worker": rows_by_worker}


def _run_beam(records, options, writer, pipeline_options=None):
    from keras_transformer.corpus.beam import run_beam

    return run_beam(records, options, writer, pipeline_options)


def _run_local(_, options, writer):
    model = CorpusModel(options.model, options.task, options.run_signature, options.version,
                        options.threads, options.xla_cache_dir)  # fmt: skip
    records = iter_records(options.input, *options.paired)
    size = options.max_batch_size * WINDOW
    count = 0
    try:
        while window := list(itertools.islice(records, size)):
            answered = [None] * len(window)
            for batch in length_sorted_batches(window, options.max_batch_size, WINDOW):
                for (index, _), result in zip(batch, model.run([r for _, r in batch])):
                    answered[index] = result
            for result in answered:
                writer.write(result)
            count += len(window)
    finally:
        model.close()
    return {"local": count}


class _ModelHolder:
    """A Ray actor's model: loaded once, run on each batch of records it
    is given (a row of Ray's batch holds one, as JSON)."""

    def __init__(self, model, task, signature, version, threads, xla_cache_dir):
        import ray

        self.model = CorpusModel(model, task, signature, version, threads, xla_cache_dir)
        self.worker = ray.get_runtime_context().get_node_id()

    def __call__(self, batch):
        results = []
        for records in batch["records"]:
            results += self.model.run(json.loads(records))
        columns = collections.defaultdict(list)
        for result in results:
            for key, value in result.items():
                columns[key].append(value)
        columns["_worker"] = [self.worker] * len(results)
        return {key: _column(values) for key, values in columns.items()}


def _column(values):
    import numpy as np

    column = np.empty(len(values), dtype=object)
    column[:] = values  # lists (n-best) stay one object a row
    return column


def ray_dataset(records, options):
    """The job of `options` as a Ray dataset of result records (each with
    a `_worker` field naming the node that ran it), for users who put it
    inside their own Ray pipeline. Needs `ray.init` first."""
    import ray

    # The driver cuts the batches, as the local engine does: sorted by
    # source length, a batch pads little and a `--jit-compile` export runs
    # full programs of few shapes. Ray's own batches would be cut from its
    # blocks, whose sizes are not multiples of the batch. Each row is one
    # batch, as JSON (one string for Ray's blocks to hold); the driver puts
    # the results back in input order. The longest batches go first: the
    # holders take the next as they finish, so the job ends on short
    # batches and no holder idles long waiting for the other's last one.
    batches = length_sorted_batches(records, options.max_batch_size, window=None,
                                    longest_first=True)  # fmt: skip
    rows = [{"records": json.dumps([record for _, record in batch], ensure_ascii=False)}
            for batch in batches]  # fmt: skip
    dataset = ray.data.from_items(rows)
    return dataset.map_batches(
        _ModelHolder,
        fn_constructor_args=(
            options.model,
            options.task,
            options.run_signature,
            options.version,
            options.threads,
            options.xla_cache_dir,
        ),  # fmt: skip
        batch_size=1,  # one batch of records a call
        batch_format="numpy",
        # No more holders than batches: a holder without one would load
        # the model for nothing. An actor that dies is started again and
        # its batch retried (Ray Data's actor pools' defaults, max_restarts
        # and max_task_retries of -1).
        compute=ray.data.ActorPoolStrategy(size=max(1, min(options.workers, len(rows)))),
        num_cpus=1,
    )


def _run_ray(records, options, writer):
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(address=options.ray_address, include_dashboard=False,
                 log_to_driver=False)  # fmt: skip
    try:
        rows_by_worker = collections.Counter()
        answered = []
        for row in ray_dataset(records, options).iter_rows():
            row = dict(row)
            rows_by_worker[row.pop("_worker")] += 1
            answered.append(_plain(row))
        for result in sorted(answered, key=lambda r: (r["file"], r["line"])):
            writer.write(result)
        return dict(rows_by_worker)
    finally:
        if started:
            ray.shutdown()


def _check_answers(address, timeout=10.0):
    """Raises `ConnectionError` naming `address` if nothing accepts a
    connection there: `ray.init` would retry it for about 12 minutes.

    `auto` and addresses without a port are left to Ray."""
    parts = split_address(address, "--ray-address")
    if parts is None:
        return
    host, port = parts
    try:
        socket.create_connection((host.strip("[]"), port), timeout=timeout).close()
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise ConnectionError(
            f"--ray-address {address}: nothing answers there ({reason}); give the "
            "address that `ray start --head` printed"
        ) from None


def _plain(row):
    """A Ray row's values as JSON takes them (NumPy scalars and arrays)."""
    out = {}
    for key, value in row.items():
        if hasattr(value, "tolist"):
            value = value.tolist()
        out[key] = value
    return out
