"""What the gRPC and REST front ends share: the served models and their calls.

Each call raises `ServingError` with a TF Serving status code name
(`NOT_FOUND`, `INVALID_ARGUMENT`, `CANCELLED`, `DEADLINE_EXCEEDED`,
`RESOURCE_EXHAUSTED`, `UNAVAILABLE`), which gRPC sends as a status and REST
as 404, 400, 504 or 503 with `{"error": ...}`.
"""

import threading
import time

import tensorflow as tf

from keras_transformer._validation import shown, shown_names
from keras_transformer.runtime.session_model import SignatureNotFound
from keras_transformer.serving.batching import POLL_SECONDS, DeadlineExceeded, RequestCancelled
from keras_transformer.serving.limits import RequestLimits, RequestRejected, request_inputs
from keras_transformer.serving.metrics import UNKNOWN, Metrics

# gRPC status code names of TensorFlow's op errors.
_OP_ERROR_CODES = {
    "InvalidArgumentError": "INVALID_ARGUMENT",
    "ResourceExhaustedError": "RESOURCE_EXHAUSTED",
    "OutOfRangeError": "OUT_OF_RANGE",
    "FailedPreconditionError": "FAILED_PRECONDITION",
    "DeadlineExceededError": "DEADLINE_EXCEEDED",
    "CancelledError": "CANCELLED",
    "UnimplementedError": "UNIMPLEMENTED",
}


class ServingError(Exception):
    """A request failed; `code` is the gRPC status code's name."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class WorkSlot:
    """One of `semaphore`'s slots, waited for while the client is there
    (`alive()`) and its deadline has not passed (`time_left()`, None
    without one); a context manager.

    Raises (on entering):
        ServingError: `DEADLINE_EXCEEDED` once the deadline passed while
            waiting for `what`, `CANCELLED` once the client left.
    """

    def __init__(self, semaphore, alive, time_left, what):
        self.semaphore, self.alive, self.time_left, self.what = semaphore, alive, time_left, what

    def __enter__(self):
        while True:
            left = self.time_left()
            if left is not None and left <= 0:
                raise ServingError(
                    "DEADLINE_EXCEEDED",
                    f"The request's deadline passed while it waited for {self.what}",
                )
            if not self.alive():
                raise ServingError("CANCELLED", "The client cancelled the request")
            wait = POLL_SECONDS if left is None else min(POLL_SECONDS, left)
            if self.semaphore.acquire(timeout=wait):
                return self

    def __exit__(self, *exc):
        self.semaphore.release()


class Models:
    """The served models by name, each a `ModelManager`.

    Args:
        limits: `RequestLimits` every request is checked against.
    """

    def __init__(self, limits=None):
        self.limits = limits or RequestLimits()
        self.metrics = Metrics()
        self.lock = threading.Lock()
        self.managers = {}

    def replace(self, managers):
        """Serves `managers` (`{name: ModelManager}`) from now on; stops the
        managers no longer served."""
        with self.lock:
            old, self.managers = self.managers, dict(managers)
        for name, manager in old.items():
            if self.managers.get(name) is not manager:
                manager.stop()

    def manager(self, name):
        with self.lock:
            manager = self.managers.get(name)
        if manager is None:
            raise ServingError("NOT_FOUND", f"Servable not found for request: model {shown(name)}")
        return manager

    @staticmethod
    def _version(manager, version=None, label=None):
        if version is not None and label is not None:
            raise ServingError("INVALID_ARGUMENT", "Name a version or a version label, not both")
        if label is not None:
            try:
                return manager.version_for_label(label)
            except ValueError as error:
                raise ServingError("INVALID_ARGUMENT", str(error)) from None
        return version

    def acquire(self, name, version=None, label=None):
        """The `Version` to serve, acquired (call its `release`)."""
        return self._get(self.manager(name), version, label)

    def _get(self, manager, version, label):
        try:
            return manager.get(self._version(manager, version, label))
        except LookupError as error:
            raise ServingError("NOT_FOUND", str(error)) from None

    def predict(self, name, inputs, signature="", version=None, label=None,
                output_filter=(), alive=lambda: True, time_left=lambda: None,
                api="grpc", yielding=False):  # fmt: skip
        """Runs a request; returns `(version number, signature, outputs)`.

        Args:
            inputs: `{name: TensorProto}` or `{name: list of bytes}`.
            output_filter: output names to return (default: all).
            alive: False once the client cancelled or its deadline passed.
            time_left: seconds to the request's deadline (None: no deadline).
            api: `"grpc"` or `"rest"`, for the metrics.
            yielding: the request runs only when no other waits, a row at a
                time (`Batcher.submit`).
        """
        start = time.monotonic()
        signature = signature or "serving_default"
        # Metric labels name only what is served: whatever else a client
        # sends is counted as UNKNOWN, so the metrics stay bounded.
        labels = {"model": UNKNOWN, "version": "", "signature": ""}
        code = "OK"
        try:
            manager = self.manager(name)
            labels["model"] = name
            if version is not None or label is not None:
                labels["version"] = UNKNOWN
            labels["signature"] = UNKNOWN
            servable = self._get(manager, version, label)
            labels["version"] = str(servable.number)
            try:
                signature_def = self._signature(servable, signature)
                labels["signature"] = signature
                outputs = self._run(servable, signature, signature_def, inputs, output_filter,
                                    alive, time_left, yielding)  # fmt: skip
                return servable.number, signature, outputs
            finally:
                servable.release()
        except ServingError as error:
            code = error.code
            raise
        finally:
            self.metrics.observe(labels["model"], labels["version"], labels["signature"], api,
                                 code, time.monotonic() - start)  # fmt: skip

    @staticmethod
    def _signature(servable, signature):
        try:
            return servable.model.signature(signature)
        except SignatureNotFound as error:
            raise ServingError("NOT_FOUND", str(error.args[0])) from None

    def _run(self, servable, signature, signature_def, inputs, output_filter, alive, time_left,
             yielding):  # fmt: skip
        unknown = set(output_filter) - set(signature_def.outputs)
        if unknown:
            raise ServingError(
                "INVALID_ARGUMENT", f"Unknown output_filter names: {shown_names(sorted(unknown))}"
            )
        left = time_left()
        if left is not None and left <= 0:  # answered, and counted, before any work
            raise ServingError("DEADLINE_EXCEEDED", "The request's deadline passed before its work")
        try:
            arrays = request_inputs(inputs, signature_def, self.limits)
            outputs = servable.run(signature, arrays, alive, time_left, yielding)
        except (RequestRejected, ValueError) as error:
            raise ServingError("INVALID_ARGUMENT", str(error)) from None
        except DeadlineExceeded as error:
            raise ServingError("DEADLINE_EXCEEDED", str(error)) from None
        except RequestCancelled as error:
            raise ServingError("CANCELLED", str(error)) from None
        except tf.errors.OpError as error:  # TF Serving answers the session's own status
            code = _OP_ERROR_CODES.get(type(error).__name__, "INTERNAL")
            raise ServingError(code, error.message) from None
        wanted = list(output_filter) or sorted(outputs)
        return {key: outputs[key] for key in wanted}

    def status(self, name, version=None, label=None):
        """`[(version, state, error message)]`, as `GetModelStatus` lists them."""
        manager = self.manager(name)
        wanted = self._version(manager, version, label)
        known = manager.statuses()
        if wanted is not None and wanted not in known:
            raise ServingError("NOT_FOUND", f"Version {wanted} of model {name} was never loaded")
        numbers = [wanted] if wanted is not None else sorted(known)
        return [(n, *known[n]) for n in numbers]

    def metadata(self, name, version=None, label=None):
        """`(version number, {signature name: SignatureDef})`."""
        servable = self.acquire(name, version, label)
        try:
            return servable.number, dict(servable.model.signatures)
        finally:
            servable.release()

    def stop(self):
        self.replace({})
