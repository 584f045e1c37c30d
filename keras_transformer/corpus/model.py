"""An export's signature run on batches of corpus records: what every
engine's workers hold, loaded once per worker process."""

import numpy as np

from keras_transformer.runtime import xla_cache
from keras_transformer.runtime.local import resolve_version_dir
from keras_transformer.runtime.session_model import SessionModel, SignatureNotFound

# Each task: its default signature, the outputs it needs, and how a row of
# them becomes a record's fields.
TASKS = {
    "translate": ("serving_default", ("translation", "score")),
    "nbest": ("translate_nbest", ("translations", "scores")),
    "score": ("score", ("log_prob", "length")),
}


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _fields(task, outputs, row):
    if task == "translate":
        return {"translation": _text(outputs["translation"][row]),
                "score": float(outputs["score"][row])}  # fmt: skip
    if task == "nbest":
        return {"translations": [_text(t) for t in outputs["translations"][row]],
                "scores": [float(s) for s in outputs["scores"][row]]}  # fmt: skip
    return {"log_prob": float(outputs["log_prob"][row]), "length": int(outputs["length"][row])}


def _utf8(values):
    return np.array([v.encode("utf-8") for v in values], dtype=object)


class CorpusModel:
    """Loads the export at `model_path` (a base of versions, or one
    version) and runs the signature of `task` on batches of records.

    Args:
        model_path: an export base or one version directory.
        task: `translate`, `nbest` or `score`.
        signature: the signature to run (default: the task's own:
            `serving_default`, `translate_nbest`, `score`); for
            `translate`, any signature that answers `translation` and
            `score` (`translate_greedy`, `translate_sample`,
            `translate_prefix`), for `nbest` `translate_prefix_nbest`: a
            prefix signature reads each record's `target_prefix`.
        version: a version under an export base (default: the newest).
        threads: the session's intra-op and inter-op threads, as TF
            Serving's `--tensorflow_intra_op_parallelism` and
            `--tensorflow_inter_op_parallelism` (default: TensorFlow's
            own, every core).
        xla_cache_dir: TensorFlow's persistent XLA cache for this
            process (`export.xla_cache.enable`), set before the export
            loads: a `--jit-compile` export reads the programs compiled
            there before instead of compiling them (default: none).

    Raises:
        ValueError: an unknown task, or an export without the signature
            asked for (or whose signature answers other outputs).
        FileNotFoundError: no export there.
    """

    def __init__(self, model_path, task="translate", signature=None, version=None,
                 threads=None, xla_cache_dir=None):  # fmt: skip
        if task not in TASKS:
            raise ValueError(f"`task` must be one of {sorted(TASKS)}. Received: {task!r}")
        if xla_cache_dir is not None:
            xla_cache.enable(xla_cache_dir)
        self.task = task
        default, self.outputs = TASKS[task]
        self.signature = signature or default
        self.export_dir = resolve_version_dir(model_path, version)
        config = None
        if threads:
            import tensorflow as tf

            config = tf.compat.v1.ConfigProto(
                intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads
            )
        self.session = SessionModel(self.export_dir, config)
        try:
            signature_def = self.session.signature(self.signature)
        except SignatureNotFound:
            self.close()
            raise ValueError(
                f"The export at {self.export_dir} has no signature {self.signature!r} for "
                f"--task {task}; it has {sorted(self.session.signatures)}"
            ) from None
        self.inputs = tuple(signature_def.inputs)
        missing = sorted(set(self.outputs) - set(signature_def.outputs))
        if missing:
            self.close()
            raise ValueError(
                f"Signature {self.signature!r} of {self.export_dir} does not answer {missing}, "
                f"which --task {task} writes"
            )

    def run(self, records):
        """The records (dicts with `source`, `target` for `score`, and
        `target_prefix` for a prefix signature, none being empty), each
        with the task's fields added, in order."""
        if not records:
            return []
        inputs = {"text": _utf8([r["source"] for r in records])}
        if self.task == "score":
            inputs["translation"] = _utf8([r["target"] for r in records])
        if "target_prefix" in self.inputs:
            inputs["target_prefix"] = _utf8([r.get("target_prefix", "") for r in records])
        outputs = self.session.run(self.signature, inputs)
        return [{**record, **_fields(self.task, outputs, row)}
                for row, record in enumerate(records)]  # fmt: skip

    def close(self):
        self.session.close()


def length_sorted_batches(records, max_batch_size, window=8, longest_first=False):
    """`records` in batches of at most `max_batch_size`, sorted by source
    length within windows of `window` batches (None: all records as one
    window), so that a batch pads little; each batch is a list of
    `(index in records, record)`. `longest_first` sorts each window from
    the longest source down (the last batch of a window holds the rest)."""
    if max_batch_size < 1:
        raise ValueError(f"`max_batch_size` must be at least 1. Received: {max_batch_size}")
    indexed = list(enumerate(records))
    span = max(len(indexed), 1) if window is None else max_batch_size * window
    for begin in range(0, len(indexed), span):
        chunk = sorted(indexed[begin : begin + span], key=lambda item: len(item[1]["source"]),
                       reverse=longest_first)  # fmt: skip
        for start in range(0, len(chunk), max_batch_size):
            yield chunk[start : start + max_batch_size]
