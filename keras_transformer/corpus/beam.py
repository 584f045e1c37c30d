"""The corpus job on Apache Beam: `RunInference` over the export's signatures.

`ExportHandler` is a Beam `ModelHandler` of our own (Beam's
`TFModelHandlerTensor` loads through Keras 2 and calls the model, not a
signature): each worker process loads the export once (`CorpusModel`, a
TensorFlow session of the SavedModel) and runs the task's signature on
batches of records. `CorpusTransform` is the job as a `PTransform` from
records (`records.read_records`) to results, for users who put it inside
their own pipeline: Beam's `SortAndBatchElements` sorts each bundle's
records by source length and cuts them into batches of up to
`max_batch_size`, so that short sentences are padded to short ones (a
compiled export runs each batch as the program of its length bucket),
and `RunInference` runs the handler on each batch.

`run_beam` is what `keras-transformer corpus --engine beam` runs: the
rest of the command line goes to Beam's `PipelineOptions` unchanged, so
the runner (`--runner DataflowRunner --project ...`, `--runner
FlinkRunner --flink_master ...`, the DirectRunner with
`--direct_num_workers 2 --direct_running_mode multi_processing`) is the
user's choice. The results come back to this process, which writes the
shards whole or not at all, in input order.

Example (within your own pipeline):

    records = read_records("mono/*.en")
    with beam.Pipeline(options=PipelineOptions(argv)) as pipeline:
        (pipeline | beam.Create(records)
                  | CorpusTransform("exports/translator", task="translate")
                  | beam.Map(json.dumps) | beam.io.WriteToText("out/translations"))
"""

import json
import os
import random
import socket
import sys
import tempfile

from keras_transformer._extras import require
from keras_transformer.corpus.model import CorpusModel

beam = require("apache_beam", "beam")
base = require("apache_beam.ml.inference.base", "beam")


class ExportHandler(base.ModelHandler):
    """A Beam `ModelHandler` running an export's signature on batches of
    records.

    Each element it takes is one batch, a list of records (as
    `CorpusTransform` forms them: sorted by length, up to its
    `max_batch_size`), run as one call of the signature; it answers the
    list of their results.

    Args:
        model: an export base or one version directory.
        task: `translate`, `nbest` or `score` (see `CorpusModel`).
        signature: the signature (default: the task's own).
        version: a version under an export base (default: the newest).
        threads: each worker session's TensorFlow threads (default 1:
            a worker is one CPU).
        xla_cache_dir: TensorFlow's persistent XLA cache for each worker
            (see `CorpusModel`); a path every worker reaches.
    """

    def __init__(self, model, task="translate", signature=None, version=None, *, threads=1,
                 xla_cache_dir=None):  # fmt: skip
        super().__init__()
        self.model, self.task, self.signature, self.version = model, task, signature, version
        self.threads, self.xla_cache_dir = threads, xla_cache_dir

    def load_model(self):
        return CorpusModel(self.model, self.task, self.signature, self.version, self.threads,
                           self.xla_cache_dir)  # fmt: skip

    def run_inference(self, batch, model, inference_args=None):
        worker = f"{socket.gethostname()}:{os.getpid()}"
        return [[{**result, "_worker": worker} for result in model.run(records)]
                for records in batch]  # fmt: skip

    def batch_elements_kwargs(self):
        # Each element is a batch already.
        return {"min_batch_size": 1, "max_batch_size": 1}

    def get_metrics_namespace(self):
        return "keras_transformer_corpus"

    def share_model_across_processes(self):
        # A shared model reaches workers as a proxy without `.signatures`:
        # each process loads its own session.
        return False


def _source_length(record):
    return len(record["source"])


class CorpusTransform(beam.PTransform):
    """Records -> results (one per record, with its `file` and `line`).

    Sorts each bundle's records by source length, cuts them into batches
    of up to `max_batch_size` (Beam's `SortAndBatchElements`, which takes
    `min_batch_size` too but does not hold a bundle's last batch to it),
    and runs `RunInference` with an `ExportHandler` on them; the other
    arguments are the handler's.
    """

    def __init__(self, model, task="translate", signature=None, version=None,
                 min_batch_size=1, max_batch_size=64, threads=1, xla_cache_dir=None):  # fmt: skip
        super().__init__()
        self.handler = ExportHandler(model, task, signature, version, threads=threads,
                                     xla_cache_dir=xla_cache_dir)  # fmt: skip
        self.min_batch_size, self.max_batch_size = min_batch_size, max_batch_size

    def expand(self, records):
        from apache_beam.ml.inference.base import RunInference

        return (
            records
            | "LengthSortedBatches"
            >> beam.SortAndBatchElements(
                min_batch_size=self.min_batch_size,
                max_batch_size=self.max_batch_size,
                # Batches are bounded by their count alone.
                max_batch_weight=sys.maxsize,
                element_size_fn=_source_length,
            )
            | "RunInference" >> RunInference(self.handler)
            | "Results" >> beam.FlatMap(lambda results: results)
        )


def _shuffled(records):
    """The records in a random order, the same on every run. The
    DirectRunner deals a stage's elements to its workers in turn, in the
    order they came: in input order, a corpus whose lines alternate short
    and long (Multi30k's English lines: 43% more characters on every second
    line of the first 3,000) gives one worker most of the work. Dealt at
    random, each worker's share of the work is its share of the lines."""
    order = list(range(len(records)))
    random.Random(0).shuffle(order)
    return [records[i] for i in order]


def checked_pipeline_options(args):
    """Beam's `PipelineOptions` of `args`, the flags of the command line
    that `corpus` does not know, refused in one line where Beam would not
    take them: a flag it does not know either (Beam drops it with a warning,
    so that a mistyped flag of ours would be lost), or a bad value (Beam's
    parser prints its whole usage and exits)."""
    import contextlib
    import io

    from apache_beam.options.pipeline_options import PipelineOptions

    args = list(args or ())
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            options = PipelineOptions(args)
            unknown = set(options.get_all_options(retain_unknown_options=True))
            unknown -= set(options.get_all_options())
    except SystemExit:
        errors = [line for line in printed.getvalue().splitlines() if ": error: " in line]
        why = errors[-1].split(": error: ", 1)[1] if errors else " ".join(args)
        raise ValueError(f"Beam's pipeline options: {why}") from None
    if unknown:
        flags = [arg for arg in args if arg.startswith("--")
                 and arg[2:].split("=", 1)[0].replace("-", "_") in unknown]  # fmt: skip
        raise ValueError(
            f"unrecognized arguments: {' '.join(flags)} (neither this command's flags "
            "nor Beam's pipeline options)"
        )
    return options


def run_beam(records, options, writer, pipeline_options=None):
    """Runs the job on Beam with `options.beam_args` as its pipeline
    options (or `pipeline_options`, `checked_pipeline_options` of them);
    writes the results to `writer` in input order; returns the rows each
    worker process answered."""
    if pipeline_options is None:
        pipeline_options = checked_pipeline_options(options.beam_args)
    with tempfile.TemporaryDirectory(prefix="kt-beam-") as folder:
        prefix = os.path.join(folder, "results")
        try:
            pipeline = beam.Pipeline(options=pipeline_options)
        except ValueError as error:  # an unknown --runner
            raise ValueError(f"Beam's pipeline options: {error}") from None
        _ = (
            pipeline
            | "Records" >> beam.Create(_shuffled(records), reshuffle=True)
            | "Translate"
            >> CorpusTransform(
                options.model,
                options.task,
                options.run_signature,
                options.version,
                max_batch_size=options.max_batch_size,
                threads=options.threads,
                xla_cache_dir=options.xla_cache_dir,
            )  # fmt: skip
            | "Json" >> beam.Map(lambda r: json.dumps(r, ensure_ascii=False))
            | "Write" >> beam.io.WriteToText(prefix, file_name_suffix=".jsonl")
        )
        pipeline.run().wait_until_finish()
        results = {}
        counts = {}
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                for line in f:
                    result = json.loads(line)
                    worker = result.pop("_worker")
                    counts[worker] = counts.get(worker, 0) + 1
                    results[result["file"], result["line"]] = result
    for record in records:
        result = results.get((record["file"], record["line"]))
        if result is not None:
            writer.write(result)
    return counts
