"""The corpus job on Apache Beam: `RunInference` over the export's signatures.

`ExportHandler` is a Beam `ModelHandler` of our own (Beam's
`TFModelHandlerTensor` loads through Keras 2 and calls the model, not a
signature): each worker process loads the export once (`CorpusModel`, a
TensorFlow session of the SavedModel) and runs the task's signature on
batches that Beam forms between `min_batch_size` and `max_batch_size`,
sorted by length within each batch so that short sentences are padded to
short ones. `CorpusTransform` is the job as a `PTransform` from records
(`records.read_records`) to results, for users who put it inside their
own pipeline. `run_beam` is what `keras-transformer corpus --engine beam`
runs: the rest of the command line goes to Beam's `PipelineOptions`
unchanged, so the runner (`--runner DataflowRunner --project ...`,
`--runner FlinkRunner --flink_master ...`, the DirectRunner with
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
import socket
import tempfile

from keras_transformer._extras import require
from keras_transformer.corpus.model import CorpusModel

beam = require("apache_beam", "beam")
base = require("apache_beam.ml.inference.base", "beam")


class ExportHandler(base.ModelHandler):
    """A Beam `ModelHandler` running an export's signature on records.

    Args:
        model: an export base or one version directory.
        task: `translate`, `nbest` or `score` (see `CorpusModel`).
        signature: the signature (default: the task's own).
        version: a version under an export base (default: the newest).
        min_batch_size, max_batch_size: the batches Beam forms.
        threads: each worker session's TensorFlow threads (default 1:
            a worker is one CPU).
    """

    def __init__(self, model, task="translate", signature=None, version=None,
                 min_batch_size=1, max_batch_size=64, threads=1):  # fmt: skip
        super().__init__()
        self.model, self.task, self.signature, self.version = model, task, signature, version
        self.min_batch_size, self.max_batch_size = min_batch_size, max_batch_size
        self.threads = threads

    def load_model(self):
        return CorpusModel(self.model, self.task, self.signature, self.version, self.threads)

    def run_inference(self, batch, model, inference_args=None):
        # Sorted by length within the batch: the signature pads to the longest.
        order = sorted(range(len(batch)), key=lambda i: len(batch[i]["source"]))
        results = model.run([batch[i] for i in order])
        answered = [None] * len(batch)
        worker = f"{socket.gethostname()}:{os.getpid()}"
        for index, result in zip(order, results):
            answered[index] = {**result, "_worker": worker}
        return answered

    def batch_elements_kwargs(self):
        return {"min_batch_size": self.min_batch_size, "max_batch_size": self.max_batch_size}

    def get_metrics_namespace(self):
        return "keras_transformer_corpus"

    def share_model_across_processes(self):
        # A shared model reaches workers as a proxy without `.signatures`:
        # each process loads its own session.
        return False


class CorpusTransform(beam.PTransform):
    """Records -> results (one per record, with its `file` and `line`):
    `RunInference` with an `ExportHandler`; the arguments are its."""

    def __init__(self, model, task="translate", signature=None, version=None,
                 min_batch_size=1, max_batch_size=64, threads=1):  # fmt: skip
        super().__init__()
        self.handler = ExportHandler(model, task, signature, version, min_batch_size,
                                     max_batch_size, threads)  # fmt: skip

    def expand(self, records):
        from apache_beam.ml.inference.base import RunInference

        return records | "RunInference" >> RunInference(self.handler)


def run_beam(records, options, writer):
    """Runs the job on Beam with `options.beam_args` as its pipeline
    options; writes the results to `writer` in input order; returns the
    rows each worker process answered."""
    from apache_beam.options.pipeline_options import PipelineOptions

    with tempfile.TemporaryDirectory(prefix="kt-beam-") as folder:
        prefix = os.path.join(folder, "results")
        pipeline = beam.Pipeline(options=PipelineOptions(list(options.beam_args)))
        _ = (
            pipeline
            | "Records" >> beam.Create(records, reshuffle=True)
            | "Translate"
            >> CorpusTransform(
                options.model,
                options.task,
                options.signature,
                options.version,
                max_batch_size=options.max_batch_size,
                threads=options.threads,
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
