"""A local TF Serving stand-in: the same gRPC API over the same loader.

`keras-transformer serve` speaks TensorFlow Serving's gRPC surface
(`PredictionService.Predict`, `GetModelMetadata`, `ModelService.
GetModelStatus`) for the exports of one model, with TF Serving's semantics:

- versions are the integer directories under the base path; the latest is
  served (`version_policy="latest"`), or all of them (`"all"`);
- a request names a version, or a version label (`version_labels`, as in
  a `model_config_list`), or gets the latest; and names a signature or
  gets `serving_default`. An unknown label is `INVALID_ARGUMENT`, as in TF
  Serving; a label or version that is not loaded is `NOT_FOUND`;
- the base path is watched: a new version is loaded beside the current one
  and swapped in without failing a request; a version that fails to load
  is refused, logged, and the current one keeps serving;
- concurrent requests to the same version and signature are batched into
  one session run;
- bad requests get `INVALID_ARGUMENT` or `NOT_FOUND` with a message.

Models load through `SessionModel`, the session-based loader TF Serving uses.
"""

import logging
import os
import queue
import threading
import time
from concurrent import futures

import grpc
import numpy as np
import tensorflow as tf
from google.protobuf import any_pb2
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    status_pb2,
)

from keras_transformer.export.servable import versions
from keras_transformer.export.session_model import SessionModel, SignatureError, SignatureNotFound

log = logging.getLogger("keras_transformer.serve")

AVAILABLE = get_model_status_pb2.ModelVersionStatus.AVAILABLE
END = get_model_status_pb2.ModelVersionStatus.END


class _Batcher:
    """Runs concurrent requests of one signature as one batch.

    Requests wait at most `timeout` seconds for company and are joined up
    to `max_batch_size` rows; inputs are concatenated along the batch axis
    and the outputs split back by rows.
    """

    def __init__(self, model, signature, max_batch_size=32, timeout=0.005):
        self.model = model
        self.signature = signature
        self.max_batch_size = max_batch_size
        self.timeout = timeout
        self.queue = queue.Queue()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def submit(self, inputs):
        done = futures.Future()
        self.queue.put((inputs, done))
        return done.result()

    def stop(self):
        self.queue.put(None)

    def _loop(self):
        while True:
            item = self.queue.get()
            if item is None:
                return
            batch = [item]
            rows = len(next(iter(item[0].values())))
            deadline = time.monotonic() + self.timeout
            while rows < self.max_batch_size:
                try:
                    nxt = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if nxt is None:
                    self.queue.put(None)
                    break
                batch.append(nxt)
                rows += len(next(iter(nxt[0].values())))
            self._run(batch)

    def _run(self, batch):
        try:
            keys = batch[0][0].keys()
            if len(batch) == 1 or any(b[0].keys() != keys for b in batch):
                for inputs, done in batch:
                    done.set_result(self.model.run(self.signature, inputs))
                return
            sizes = [len(inputs[next(iter(keys))]) for inputs, _ in batch]
            joined = {k: np.concatenate([inputs[k] for inputs, _ in batch]) for k in keys}
            outputs = self.model.run(self.signature, joined)
            offsets = np.cumsum([0] + sizes)
            for i, (_, done) in enumerate(batch):
                done.set_result({k: v[offsets[i] : offsets[i + 1]] for k, v in outputs.items()})
        except Exception as error:  # every waiting request learns of it
            for _, done in batch:
                if not done.done():
                    done.set_exception(error)


class _Version:
    """A loaded version, with a batcher per signature and a use count."""

    def __init__(self, number, path, batching):
        self.number = number
        self.model = SessionModel(path)
        self.batching = batching
        self.batchers = {}
        self.lock = threading.Lock()
        self.active = 0
        self.retired = False

    def run(self, signature, inputs):
        self.model.check_inputs(signature, inputs)
        if not self.batching:
            return self.model.run(signature, inputs)
        with self.lock:
            batcher = self.batchers.get(signature)
            if batcher is None:
                batcher = self.batchers[signature] = _Batcher(
                    self.model, signature, **self.batching
                )
        return batcher.submit(inputs)

    def acquire(self):
        with self.lock:
            self.active += 1

    def release(self):
        with self.lock:
            self.active -= 1
            close = self.retired and self.active == 0
        if close:
            self._close()

    def retire(self):
        with self.lock:
            self.retired = True
            close = self.active == 0
        if close:
            self._close()

    def _close(self):
        for batcher in self.batchers.values():
            batcher.stop()
        self.model.close()


class ModelManager:
    """Loads and swaps the versions of one model under a base path.

    Args:
        base_path: directory of integer version subdirectories.
        name: the model name clients use.
        version_policy: `"latest"` (serve the newest version) or `"all"`.
        poll_seconds: how often the base path is scanned; 0 disables it.
        batching: `_Batcher` options, or None for no batching.
        version_labels: `{label: version}` that requests may name instead
            of a version (e.g. `{"stable": 1, "canary": 2}` with
            `version_policy="all"`).
    """

    def __init__(
        self,
        base_path,
        name,
        version_policy="latest",
        poll_seconds=2.0,
        batching=None,
        version_labels=None,
    ):
        if version_policy not in ("latest", "all"):
            raise ValueError(
                f"`version_policy` must be latest or all. Received: {version_policy!r}"
            )
        self.version_labels = _check_labels(version_labels or {})
        if not os.path.isdir(base_path):
            raise FileNotFoundError(f"Model base path not found: {base_path}")
        self.base_path = base_path
        self.name = name
        self.version_policy = version_policy
        self.batching = {"max_batch_size": 32, "timeout": 0.005} if batching is None else batching
        self.lock = threading.Lock()
        self.versions = {}  # number -> _Version
        self.failed = {}  # number -> (mtime, error message)
        self._stop = threading.Event()
        self.refresh()
        self.watcher = None
        if poll_seconds:
            self.watcher = threading.Thread(target=self._watch, args=(poll_seconds,), daemon=True)
            self.watcher.start()

    def _on_disk(self):
        paths = {n: os.path.join(self.base_path, str(n)) for n in versions(self.base_path)}
        return {n: p for n, p in paths.items() if os.path.exists(os.path.join(p, "saved_model.pb"))}

    def refresh(self):
        """Loads new versions and unloads removed or superseded ones."""
        on_disk = self._on_disk()
        wanted = sorted(on_disk, reverse=True)
        for number in wanted:
            if number in self.versions:
                if self.version_policy == "latest":
                    break
                continue
            mtime = os.path.getmtime(on_disk[number])
            if self.failed.get(number, (None,))[0] == mtime:
                continue  # already refused; retried only if it changes
            try:
                version = _Version(number, on_disk[number], self.batching)
            except Exception as error:
                self.failed[number] = (mtime, str(error))
                log.error("Refusing version %s of %s: %s", number, self.name, error)
                continue
            with self.lock:
                self.versions[number] = version
            log.info("Serving version %s of %s", number, self.name)
            if self.version_policy == "latest":
                break
        with self.lock:
            keep = set(on_disk)
            if self.version_policy == "latest" and self.versions:
                newest = (
                    max(n for n in self.versions if n in keep)
                    if keep & set(self.versions)
                    else None
                )
                keep = {newest} if newest is not None else set()
            dropped = [v for n, v in self.versions.items() if n not in keep]
            for version in dropped:
                del self.versions[version.number]
        for version in dropped:
            log.info("Unloading version %s of %s", version.number, self.name)
            version.retire()

    def _watch(self, poll_seconds):
        while not self._stop.wait(poll_seconds):
            try:
                self.refresh()
            except Exception:  # the watcher never dies; the models keep serving
                log.exception("Scanning %s failed", self.base_path)

    def version_for_label(self, label):
        """The version a label names; `ValueError` for an unknown label."""
        if label not in self.version_labels:
            raise ValueError(f"Unrecognized servable version label: {label}")
        return self.version_labels[label]

    def get(self, version=None):
        """The `_Version` to serve (acquired: call `release` after use)."""
        with self.lock:
            if not self.versions:
                raise LookupError(f"Model {self.name} has no servable version")
            number = max(self.versions) if version is None else version
            if number not in self.versions:
                raise LookupError(
                    f"Version {number} of model {self.name} is not served; "
                    f"served: {sorted(self.versions)}"
                )
            servable = self.versions[number]
            servable.acquire()
            return servable

    def stop(self):
        self._stop.set()
        with self.lock:
            versions = list(self.versions.values())
            self.versions = {}
        for version in versions:
            version.retire()


def _check_labels(labels):
    for label, version in labels.items():
        if not isinstance(label, str) or not label:
            raise ValueError(f"A version label must be a non-empty string. Received: {label!r}")
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(
                f"Version label {label!r} must name a version number >= 0. Received: {version!r}"
            )
    return dict(labels)


def parse_version_labels(pairs):
    """`["stable=1", "canary=2"]` -> `{"stable": 1, "canary": 2}`."""
    labels = {}
    for pair in pairs or ():
        label, sep, version = pair.partition("=")
        if not sep or not version.strip().isdigit():
            raise ValueError(f"A version label is LABEL=VERSION, e.g. stable=1. Received: {pair!r}")
        if label in labels:
            raise ValueError(f"Version label {label!r} is given twice")
        labels[label] = int(version)
    return _check_labels(labels)


def _requested_version(spec, manager, context):
    """The version a `ModelSpec` asks for (None: the latest)."""
    choice = spec.WhichOneof("version_choice")
    if choice == "version":
        return spec.version.value
    if choice == "version_label":
        try:
            return manager.version_for_label(spec.version_label)
        except ValueError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
    return None


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, managers):
        self.managers = managers

    def _manager(self, spec, context):
        manager = self.managers.get(spec.name)
        if manager is None:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"Servable not found for request: model {spec.name!r}"
            )
        return manager

    def _servable(self, spec, context):
        manager = self._manager(spec, context)
        try:
            return manager.get(_requested_version(spec, manager, context))
        except LookupError as error:
            context.abort(grpc.StatusCode.NOT_FOUND, str(error))

    def Predict(self, request, context):
        servable = self._servable(request.model_spec, context)
        try:
            signature = request.model_spec.signature_name or "serving_default"
            try:
                inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
            except Exception as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Malformed input tensor: {error}")
            try:
                outputs = servable.run(signature, inputs)
            except SignatureNotFound as error:
                context.abort(grpc.StatusCode.NOT_FOUND, str(error.args[0]))
            except SignatureError as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
            except tf.errors.InvalidArgumentError as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, error.message)
            response = predict_pb2.PredictResponse()
            response.model_spec.name = request.model_spec.name
            response.model_spec.version.value = servable.number
            response.model_spec.signature_name = signature
            wanted = set(request.output_filter) or set(outputs)
            unknown = wanted - set(outputs)
            if unknown:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Unknown output_filter names: {sorted(unknown)}",
                )
            for key in wanted:
                response.outputs[key].CopyFrom(tf.make_tensor_proto(outputs[key]))
            return response
        finally:
            servable.release()

    def GetModelMetadata(self, request, context):
        if list(request.metadata_field) != ["signature_def"]:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "Metadata field signature_def is the one supported; received "
                f"{list(request.metadata_field)}",
            )
        servable = self._servable(request.model_spec, context)
        try:
            response = get_model_metadata_pb2.GetModelMetadataResponse()
            response.model_spec.name = request.model_spec.name
            response.model_spec.version.value = servable.number
            signatures = get_model_metadata_pb2.SignatureDefMap()
            for key, value in servable.model.signatures.items():
                signatures.signature_def[key].CopyFrom(value)
            packed = any_pb2.Any()
            packed.Pack(signatures)
            response.metadata["signature_def"].CopyFrom(packed)
            return response
        finally:
            servable.release()


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, managers):
        self.managers = managers

    def GetModelStatus(self, request, context):
        spec = request.model_spec
        manager = self.managers.get(spec.name)
        if manager is None:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"Could not find any versions of model {spec.name!r}"
            )
        wanted = _requested_version(spec, manager, context)
        with manager.lock:
            served = sorted(manager.versions)
        if wanted is not None and wanted not in served:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"Version {wanted} of model {spec.name} is not served"
            )
        response = get_model_status_pb2.GetModelStatusResponse()
        for number in [wanted] if wanted is not None else served:
            status = response.model_version_status.add()
            status.version = number
            status.state = AVAILABLE
            status.status.CopyFrom(status_pb2.StatusProto(error_code=0, error_message=""))
        return response


def start_server(
    model_base_path,
    model_name,
    host="127.0.0.1",
    port=8500,
    poll_seconds=2.0,
    version_policy="latest",
    batching=None,
    max_workers=16,
    version_labels=None,
):
    """Starts serving; returns `(grpc_server, bound_port, manager)`.

    `port=0` picks a free port. Binds to loopback unless `host` says
    otherwise. The other arguments are `ModelManager`'s.
    """
    manager = ModelManager(
        model_base_path, model_name, version_policy, poll_seconds, batching, version_labels
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers),
        options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)],
    )
    managers = {model_name: manager}
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionServicer(managers), server
    )
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelServicer(managers), server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        manager.stop()
        raise OSError(f"Could not bind {host}:{port}")
    server.start()
    return server, bound, manager


def serve_forever(
    model_base_path,
    model_name,
    host="127.0.0.1",
    port=8500,
    poll_seconds=2.0,
    version_policy="latest",
    version_labels=None,
):
    """`keras-transformer serve`: serves until interrupted."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    server, bound, manager = start_server(
        model_base_path,
        model_name,
        host,
        port,
        poll_seconds,
        version_policy,
        version_labels=version_labels,
    )
    log.info("Serving %s from %s on %s:%s (gRPC)", model_name, model_base_path, host, bound)
    print(f"READY {host}:{bound}", flush=True)
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop(grace=2)
        manager.stop()
