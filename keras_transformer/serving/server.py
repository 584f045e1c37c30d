"""A local TF Serving stand-in: the same gRPC API over the same loader.

`keras-transformer serve` speaks TensorFlow Serving's gRPC surface
(`PredictionService.Predict`, `GetModelMetadata`, `ModelService.
GetModelStatus`) for the exports of one model, with TF Serving's semantics:

- versions are the folders of ASCII digits under the base path, read as
  TF Serving reads them; the latest is served (`version_policy="latest"`),
  or all of them (`"all"`), or a list of them (`specific`);
- a request names a version, or a version label (`version_labels`, as in
  a `model_config_list`), or gets the latest; and names a signature or
  gets `serving_default`. An unknown label is `INVALID_ARGUMENT`, as in TF
  Serving; a label or version that is not loaded is `NOT_FOUND`;
- the base path is watched: a new version is loaded beside the current one
  and swapped in without failing a request; a version that fails to load
  is refused, logged, and the current one keeps serving;
- concurrent requests to the same version and signature are batched into
  one session run; a request larger than the batch runs as batch-sized
  pieces interleaved with other requests, and stops when its client
  cancels or its deadline passes;
- every request is checked against `RequestLimits` from the proto, before
  any tensor is made: rank, declared shape against the values present,
  rows, bytes per string and per request (`INVALID_ARGUMENT` naming the
  limit);
- a version refused while being written is retried once any file under it
  changes; `GetModelStatus` lists every version the server knows, with the
  error of a failed load;
- SIGTERM (and Ctrl-C) drain: no new requests, the ones in flight finish
  within a grace period, exit 0. A port in use is an error, not shared.

Models load through `SessionModel`, the session-based loader TF Serving uses.
"""

import logging
import signal
import threading
from concurrent import futures

import grpc
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

from keras_transformer.export.session_model import SignatureNotFound
from keras_transformer.serving.batching import RequestCancelled
from keras_transformer.serving.limits import RequestLimits, RequestRejected, request_inputs
from keras_transformer.serving.versions import ModelManager, parse_version_labels

__all__ = ["ModelManager", "RequestLimits", "parse_version_labels", "serve_forever", "start_server"]

log = logging.getLogger("keras_transformer.serve")

# error.Code values of TF Serving's StatusProto.
_UNKNOWN_ERROR = 2


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
    def __init__(self, managers, limits):
        self.managers = managers
        self.limits = limits

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
                signature_def = servable.model.signature(signature)
            except SignatureNotFound as error:
                context.abort(grpc.StatusCode.NOT_FOUND, str(error.args[0]))
            unknown = set(request.output_filter) - set(signature_def.outputs)
            if unknown:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Unknown output_filter names: {sorted(unknown)}",
                )
            try:
                inputs = request_inputs(request.inputs, signature_def, self.limits)
                outputs = servable.run(signature, inputs, alive=context.is_active)
            except (RequestRejected, ValueError) as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
            except RequestCancelled as error:
                context.abort(grpc.StatusCode.CANCELLED, str(error))
            except tf.errors.InvalidArgumentError as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, error.message)
            response = predict_pb2.PredictResponse()
            response.model_spec.name = request.model_spec.name
            response.model_spec.version.value = servable.number
            response.model_spec.signature_name = signature
            for key in set(request.output_filter) or set(outputs):
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
        known = manager.statuses()
        if wanted is not None and wanted not in known:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"Could not find version {wanted} of model {spec.name}"
            )
        response = get_model_status_pb2.GetModelStatusResponse()
        for number in [wanted] if wanted is not None else sorted(known):
            state, error = known[number]
            status = response.model_version_status.add()
            status.version = number
            status.state = state
            status.status.CopyFrom(
                status_pb2.StatusProto(error_code=_UNKNOWN_ERROR if error else 0,
                                       error_message=error)
            )  # fmt: skip
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
    limits=None,
):
    """Starts serving; returns `(grpc_server, bound_port, manager)`.

    `port=0` picks a free port. Binds to loopback unless `host` says
    otherwise. `limits` is a `RequestLimits`; the other arguments are
    `ModelManager`'s.

    Raises:
        OSError: the address cannot be bound (e.g. the port is in use).
    """
    limits = limits or RequestLimits()
    manager = ModelManager(
        model_base_path, model_name, version_policy, poll_seconds, batching, version_labels
    )
    options = [
        # A second server on a used port must fail, not share its traffic.
        ("grpc.so_reuseport", 0),
        ("grpc.max_receive_message_length", limits.max_request_bytes + (1 << 20)),
        ("grpc.max_send_message_length", 256 * 1024 * 1024),
    ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers), options=options)
    managers = {model_name: manager}
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionServicer(managers, limits), server
    )
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelServicer(managers), server)
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:
        bound = 0
    if bound == 0:
        manager.stop()
        raise OSError(f"Could not bind {host}:{port}: the port is in use or not available")
    server.start()
    return server, bound, manager


def serve_forever(model_base_path, model_name, host="127.0.0.1", port=8500, poll_seconds=2.0,
                  version_policy="latest", version_labels=None, batching=None, limits=None,
                  drain_seconds=30.0):  # fmt: skip
    """`keras-transformer serve`: serves until SIGTERM or Ctrl-C, then drains.

    On either signal the server accepts no new request, lets the requests
    in flight finish for up to `drain_seconds`, and returns.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    server, bound, manager = start_server(
        model_base_path, model_name, host, port, poll_seconds, version_policy,
        batching=batching, version_labels=version_labels, limits=limits,
    )  # fmt: skip
    log.info("Serving %s from %s on %s:%s (gRPC)", model_name, model_base_path, host, bound)
    print(f"READY {host}:{bound}", flush=True)
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        while not stop.wait(0.5):
            pass
    finally:
        log.info("Draining: no new requests, up to %.0f s for the ones in flight", drain_seconds)
        server.stop(grace=drain_seconds).wait()
        manager.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.info("Stopped")
