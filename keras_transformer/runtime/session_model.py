"""A SavedModel loaded the way TensorFlow Serving loads it.

TF Serving does not call `tf.saved_model.load`: its C++ loader builds the
MetaGraph tagged `serve` in a session, restores variables with the saver's
restore op, runs the init op, and then runs signatures by tensor name.
`SessionModel` does exactly that through `tf.compat.v1.saved_model.loader`,
so a model that works here is a model TF Serving can run.
"""

import collections.abc
import logging
import threading

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops, as TF Serving links them)

from keras_transformer._validation import shown

SERVE_TAG = "serve"
PREDICT_METHOD = "tensorflow/serving/predict"


class _LoaderDeprecationNotice(logging.Filter):
    """Drops TensorFlow's notice that the v1 loader is deprecated in favour of
    `tf.saved_model.load`: loading the way TF Serving does is the point here,
    and the notice would come before a command line's one-line error."""

    def filter(self, record):
        # TensorFlow's deprecation records name the deprecated function's module third.
        return not (isinstance(record.args, tuple) and "loader_impl" in str(record.args[2:3]))


class SignatureError(ValueError):
    """A request does not fit a signature (TF Serving: INVALID_ARGUMENT)."""


class SignatureNotFound(KeyError):
    """No such signature (TF Serving: NOT_FOUND)."""


class SessionModel:
    """One SavedModel version, loaded in its own graph and session.

    Args:
        export_dir: a SavedModel directory (e.g. `exports/translator/3`).
        config: a `tf.compat.v1.ConfigProto` for the session, as TF
            Serving's `--tensorflow_intra_op_parallelism` and
            `--tensorflow_inter_op_parallelism` set it. `None` takes
            TensorFlow's defaults: thread pools as wide as the machine.
            One thread each way decodes single requests faster on a small
            CPU and large batches slower (`benchmarks/RESULTS.md`). Thread
            pools are shared within a process once made, so the setting
            holds fully in one that has run no eager op, as TF Serving's.

    Example:

    >>> session = SessionModel(export_dir)
    >>> outputs = session.run("serving_default", {"text": np.array([b"The child sleeps."])})
    >>> sorted(outputs), outputs["translation"].shape
    (['score', 'translation'], (1,))
    """

    def __init__(self, export_dir, config=None):
        if config is not None and not isinstance(config, tf.compat.v1.ConfigProto):
            # Refused here: TensorFlow's Session would fail half-built, and
            # its finalizer then raise again at garbage collection.
            raise TypeError(
                f"`config` must be a tf.compat.v1.ConfigProto or None. Received: {config!r}"
            )
        self.export_dir = export_dir
        self.config = config
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph, config=config)
        notice = _LoaderDeprecationNotice()
        tf.get_logger().addFilter(notice)
        try:
            with self.graph.as_default():
                self.meta_graph = tf.compat.v1.saved_model.loader.load(
                    self.session, [SERVE_TAG], export_dir
                )
        finally:
            tf.get_logger().removeFilter(notice)
        # `__saved_model_init_op` is bookkeeping, not a servable signature.
        self.signatures = {
            k: v for k, v in self.meta_graph.signature_def.items() if not k.startswith("__")
        }
        # A session is thread-safe, but one request at a time keeps latency
        # predictable; the server batches concurrent requests instead.
        self._lock = threading.Lock()

    def signature(self, name):
        if name not in self.signatures:
            raise SignatureNotFound(
                f"Signature {shown(name)} not found; available: {sorted(self.signatures)}"
            )
        return self.signatures[name]

    def check_inputs(self, name, inputs):
        """Validates `inputs` against signature `name`.

        Args:
            name: the signature's name.
            inputs: a dict of input name to a NumPy array, or to what
                `np.asarray` makes one of (a list of str).

        Returns:
            The inputs as NumPy arrays, as `run` feeds them.
        """
        signature = self.signature(name)
        if not isinstance(inputs, collections.abc.Mapping):
            raise SignatureError(
                f"Inputs must be a dict of input name to array; received {type(inputs).__name__}"
            )
        expected = set(signature.inputs)
        missing = sorted(expected - set(inputs))
        unknown = sorted(set(inputs) - expected)
        if missing or unknown:
            raise SignatureError(
                f"Signature {name!r} takes inputs {sorted(expected)}; "
                f"missing {missing}, unknown {unknown}"
            )
        inputs = {key: _as_array(key, value) for key, value in inputs.items()}
        for key, value in inputs.items():
            info = signature.inputs[key]
            want = tf.dtypes.as_dtype(info.dtype)
            got = value.dtype
            ok = (want == tf.string and (got.kind in "SOU")) or (
                want != tf.string and got == want.as_numpy_dtype
            )
            if not ok:
                raise SignatureError(f"Input {key!r} must be {want.name}; received {got}")
            if not info.tensor_shape.unknown_rank:
                rank = len(info.tensor_shape.dim)
                if value.ndim != rank:
                    raise SignatureError(
                        f"Input {key!r} must have rank {rank}; received shape {list(value.shape)}"
                    )
        rows = {key: len(value) for key, value in inputs.items() if np.ndim(value)}
        if len(set(rows.values())) > 1:
            raise SignatureError(f"The inputs must have the same number of rows; received {rows}")
        return inputs

    def run(self, name, inputs):
        """Runs signature `name` on `inputs` (a dict of input name to array,
        as `check_inputs` takes it)."""
        inputs = self.check_inputs(name, inputs)
        signature = self.signature(name)
        feeds = {signature.inputs[k].name: v for k, v in inputs.items()}
        fetches = {k: v.name for k, v in signature.outputs.items()}
        with self._lock:
            return self.session.run(fetches, feeds)

    def close(self):
        self.session.close()


def _as_array(key, value):
    try:
        return np.asarray(value)
    except ValueError as error:  # ragged nested lists
        raise SignatureError(f"Input {key!r} is not an array: {error}") from None


def run_signature(export_dir, name, sentences):
    """Loads `export_dir` and runs signature `name` on a list of str."""
    model = SessionModel(export_dir)
    try:
        return model.run(
            name, {"text": np.array([s.encode("utf-8") for s in sentences], dtype=object)}
        )
    finally:
        model.close()
