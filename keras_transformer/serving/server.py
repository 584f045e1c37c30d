"""A local TF Serving stand-in: the same gRPC API over the same loader.

`keras-transformer serve` speaks TensorFlow Serving's gRPC surface
(`PredictionService.Predict`, `GetModelMetadata`, `ModelService.
GetModelStatus`) and, with a REST port, its REST API (see `rest.py`), for
one model or for the models of a `--model-config-file`, with TF Serving's
semantics:

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
  one session run; a request larger than the room left in a batch fills
  it and goes on in later batches beside other requests, and stops when
  its client cancels or its deadline passes;
- every request is checked against `RequestLimits` from the proto, before
  any tensor is made: rank, declared shape against the values present,
  rows, bytes per string and per request (`INVALID_ARGUMENT` naming the
  limit);
- a version refused while being written is retried once any file under it
  changes; `GetModelStatus` lists every version the server knows, with the
  error of a failed load;
- SIGTERM (and Ctrl-C) drain: no new requests, the ones in flight finish
  within a grace period, exit 0 a few seconds later at most, whatever is
  still running. A port in use is an error, not shared;
- gRPC Predict calls run `grpc_max_threads` at once and wait their turn
  beyond, up to their deadline; status and metadata calls never wait for
  them. A call whose deadline passed is answered `DEADLINE_EXCEEDED`
  before any work (and counted), on the thread that takes calls if it
  expired before it was taken; that thread and gRPC's I/O threads run
  below the model's priority (`grpc_io_nice`), so that clients flooding
  the server with expiring or cancelled calls do not hold up others. The
  calls of a connection whose client cancels most of its calls wait up to
  `grpc_hold_cancelling_ms` before any work, those cancelled meanwhile
  get none (`cancelling`), and those still wanted run when no other request
  waits, a row a batch (`batching.Batcher`'s `yielding`). A request of no
  rows is answered with outputs of no rows;
- a changed model config file is applied whole or not at all: one that
  names a missing base path or a bad label, or whose new model fails to
  start, leaves the models, labels, memory and threads as they were;
- metrics label only what is served (`metrics.UNKNOWN` for the rest);
- the sessions' thread pools are TensorFlow's choice unless set, as TF
  Serving's `--tensorflow_intra_op_parallelism` and
  `--tensorflow_inter_op_parallelism` set them (`intra_op_threads`,
  `inter_op_threads`): one thread each way answers single requests sooner
  on a small CPU and large batches later;
- `serve_forever` moves the objects that loading made (TensorFlow's,
  Keras', the models') out of Python's garbage collection once it has
  started (`gc.freeze`): a full collection then scans what requests make,
  not the whole process, and stops every thread for about a millisecond,
  not 0.4 s. Versions loaded later are frozen too, and an unloaded one is
  collected whole (`collector`).

All settings are one `ServerOptions`. Models load through `SessionModel`,
the session-based loader TF Serving uses.
"""

import logging
import os
import signal
import threading
import time

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

from keras_transformer._validation import shown_names
from keras_transformer.runtime import xla_cache
from keras_transformer.serving import collector, grpc_intake
from keras_transformer.serving.cancelling import CancellingClients
from keras_transformer.serving.core import Models, ServingError, WorkSlot
from keras_transformer.serving.limits import RequestLimits
from keras_transformer.serving.metrics import UNKNOWN
from keras_transformer.serving.model_config import ModelEntry, read_model_config
from keras_transformer.serving.options import ServerOptions, check_labels, parse_version_labels
from keras_transformer.serving.rest import start_rest_server
from keras_transformer.serving.versions import ModelManager

__all__ = [
    "ModelManager",
    "RequestLimits",
    "ServerOptions",
    "Serving",
    "parse_version_labels",
    "serve_forever",
    "start",
    "start_server",
]

log = logging.getLogger("keras_transformer.serve")

# error.Code of TF Serving's StatusProto for a failed load.
_UNKNOWN_ERROR = 2
# How long past its drain period a stopping server waits for what is stuck.
EXIT_GRACE_SECONDS = 5.0
# gRPC calls worked on or waiting beside the Predict calls that run: status
# and metadata calls, and Predict calls waiting their turn (or expiring).
CALL_THREADS = 128
# The shortest hold of a call of a connection that cancels most of its
# calls: time for its client's cancel to reach the server.
MIN_HOLD_SECONDS = 0.05


def request_limits(options):
    """The `RequestLimits` of `options`."""
    return RequestLimits(
        max_rows=options.max_request_rows,
        max_string_bytes=options.max_string_bytes,
        max_request_bytes=options.max_request_bytes,
    )


def _spec_version(spec):
    """`(version, label)` a `ModelSpec` asks for."""
    choice = spec.WhichOneof("version_choice")
    if choice == "version":
        return spec.version.value, None
    if choice == "version_label":
        return None, spec.version_label
    return None, None


def _abort(context, error):
    """Ends the call with the status of a `ServingError`."""
    context.abort(getattr(grpc.StatusCode, error.code), str(error))


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """`Predict` waits for one of `slots`; `GetModelMetadata` never does."""

    def __init__(self, models, slots):
        self.models = models
        self.slots = slots

    def Predict(self, request, context):
        remaining = context.time_remaining()
        deadline = None if remaining is None else time.monotonic() + remaining

        def time_left():
            return None if deadline is None else deadline - time.monotonic()

        try:
            # A call that was held yields to the others: its connection
            # cancels most of its calls, and may have cancelled this one.
            yielding = grpc_intake.running_held_call()
            with WorkSlot(self.slots, context.is_active, time_left, "a gRPC Predict thread"):
                return self._predict(request, context.is_active, time_left, yielding)
        except ServingError as error:
            _abort(context, error)
        except Exception:  # a fault of ours: this request fails, the server serves on
            log.exception("Predict failed")
            context.abort(grpc.StatusCode.INTERNAL, "Internal error of the server; see its log")

    def _predict(self, request, alive, time_left, yielding):
        spec = request.model_spec
        number, signature, outputs = self.models.predict(
            spec.name, dict(request.inputs), spec.signature_name, *_spec_version(spec),
            output_filter=list(request.output_filter), alive=alive, time_left=time_left,
            yielding=yielding,
        )  # fmt: skip
        response = predict_pb2.PredictResponse()
        response.model_spec.name = spec.name
        response.model_spec.version.value = number
        response.model_spec.signature_name = signature
        for key, value in outputs.items():
            response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
        return response

    def GetModelMetadata(self, request, context):
        if list(request.metadata_field) != ["signature_def"]:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "Metadata field signature_def is the one supported; received "
                f"{shown_names(request.metadata_field)}",
            )
        spec = request.model_spec
        try:
            number, signatures = self.models.metadata(spec.name, *_spec_version(spec))
        except ServingError as error:
            _abort(context, error)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = spec.name
        response.model_spec.version.value = number
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for key, value in signatures.items():
            signature_map.signature_def[key].CopyFrom(value)
        packed = any_pb2.Any()
        packed.Pack(signature_map)
        response.metadata["signature_def"].CopyFrom(packed)
        return response


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, models):
        self.models = models

    def GetModelStatus(self, request, context):
        spec = request.model_spec
        try:
            statuses = self.models.status(spec.name, *_spec_version(spec))
        except ServingError as error:
            _abort(context, error)
        response = get_model_status_pb2.GetModelStatusResponse()
        for number, state, error in statuses:
            status = response.model_version_status.add()
            status.version = number
            status.state = state
            status.status.CopyFrom(
                status_pb2.StatusProto(error_code=_UNKNOWN_ERROR if error else 0,
                                       error_message=error)
            )  # fmt: skip
        return response


class GrpcServer:
    """TF Serving's gRPC services on grpcio's thread-per-call server.

    gRPC's core queues the calls that arrive until the server takes them,
    and cancels arriving calls, of every connection, at random once that
    queue holds `grpc.server.max_pending_requests` (1000) and always at
    `grpc.server.max_pending_requests_hard_limit` (3000). This server takes
    calls on a thread that does nothing else, answers a call whose
    deadline passed there, before any pool thread (`grpc_intake`), and
    runs that thread and gRPC's I/O threads `io_nice` steps below the
    model's, so that clients flooding it with expiring calls neither fill
    that queue nor take the CPU from the model. (grpcio's asyncio server
    took each call through several turns of its one event loop: such a
    flood filled the queue, and well-behaved clients' calls were cancelled
    on arrival.)

    Args:
        models: the `core.Models` served.
        address: `HOST:PORT` to bind.
        predict_threads: Predict calls run at once; more wait their turn
            (up to their deadline), on threads of their own: status and
            metadata calls never wait for them.
        max_request_bytes: the largest request message accepted.
        channel_arguments: more `(name, value)` gRPC server arguments.
        io_nice: `nice` steps below the model of the thread that takes
            calls and of gRPC's I/O threads (Linux; 0 to 19).
        hold_cancelling: the longest, in seconds, that a call of a
            connection whose client cancels most of its calls waits before
            any work (`cancelling.CancellingClients`); 0 holds none.

    Raises:
        OSError: the address cannot be bound (e.g. the port is in use).
    """

    def __init__(self, models, address, predict_threads, max_request_bytes,
                 channel_arguments=(), io_nice=0, hold_cancelling=0.0):  # fmt: skip
        grpc_intake.install()

        # Calls answered where they enter: their request is never read, so
        # their model is not known.
        def expired():
            models.metrics.observe(UNKNOWN, "", "", "grpc", "DEADLINE_EXCEEDED", 0.0)

        def cancelled():
            models.metrics.observe(UNKNOWN, "", "", "grpc", "CANCELLED", 0.0)

        self.cancelling = None
        if hold_cancelling > 0:
            self.cancelling = CancellingClients(
                min_hold=min(MIN_HOLD_SECONDS, hold_cancelling), max_hold=hold_cancelling
            )
        self.pool = grpc_intake.CallPool(predict_threads + CALL_THREADS, "grpc", expired,
                                         io_nice, self.cancelling, cancelled)  # fmt: skip
        options = [
            # A second server on a used port must fail, not share its traffic.
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", max_request_bytes),
            ("grpc.max_send_message_length", 256 * 1024 * 1024),
            *channel_arguments,
        ]
        self.server = grpc.server(self.pool, options=options)
        slots = threading.BoundedSemaphore(predict_threads)
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            PredictionServicer(models, slots), self.server
        )
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(
            ModelServicer(models), self.server
        )
        try:
            self.port = self.server.add_insecure_port(address)
        except RuntimeError:
            self.port = 0
        if not self.port:
            raise OSError(f"Could not bind {address}: the port is in use or not available")
        self.server.start()

    def stop(self, grace=None):
        """Refuses new calls, lets those in flight finish for up to `grace`
        seconds, then cancels them; returns an event set once stopped."""
        return self.server.stop(grace)


class Serving:
    """A running server: gRPC, optionally REST, and the config watcher.

    Attributes:
        models: the `core.Models` served.
        options: the `ServerOptions` it runs with.
        grpc_server, grpc_port: the `GrpcServer` and its bound port.
        rest_server, rest_port: the REST server and its port (or None).
    """

    def __init__(self, models, grpc_server, grpc_port, rest_server=None, rest_port=None,
                 options=None, make_manager=None):  # fmt: skip
        self.models = models
        self.grpc_server = grpc_server
        self.grpc_port = grpc_port
        self.rest_server = rest_server
        self.rest_port = rest_port
        self.options = options or ServerOptions()
        self._make_manager = make_manager
        self._stop = threading.Event()
        self.watcher = None

    def apply(self, entries):
        """Serves the models of `entries` (`ModelEntry`s), whole or not at
        all: a model whose versions are unchanged is kept (with its new
        labels); a new or changed one is started. If any entry is refused,
        the managers started for this call are stopped and the models
        served, with their labels, stay as they were.

        Raises:
            ValueError, OSError: an entry was refused; the message says why.
        """
        for entry in entries:
            if not os.path.isdir(entry.base_path):
                raise FileNotFoundError(
                    f"Model {entry.name!r}: base path not found: {entry.base_path}"
                )
            check_labels(entry.labels)
        with self.models.lock:
            current = dict(self.models.managers)
        managers, started, relabelled = {}, [], []
        try:
            for entry in entries:
                manager = current.get(entry.name)
                if (
                    manager is not None
                    and manager.entry is not None
                    and (manager.entry.same_versions(entry))
                ):
                    relabelled.append((manager, entry))
                else:
                    manager = self._make_manager(entry)
                    started.append(manager)
                managers[entry.name] = manager
        except BaseException:
            for manager in started:
                manager.stop()
            raise
        for manager, entry in relabelled:
            manager.relabel(entry)
        self.models.replace(managers)

    def watch_config(self, path, poll_seconds):
        """Re-reads the model config file whenever it changes."""

        def loop():
            seen = _mtime(path)
            while not self._stop.wait(poll_seconds):
                current = _mtime(path)
                if current == seen:
                    continue
                seen = current
                try:
                    entries = read_model_config(path)
                    self.apply(entries)
                    log.info("Serving the models of %s: %s", path, [e.name for e in entries])
                except Exception as error:  # keep serving what we have
                    log.error("Ignoring the changed model config %s: %s", path, error)

        self.watcher = threading.Thread(target=loop, name="model-config", daemon=True)
        self.watcher.start()

    def stop(self, grace=0.0):
        """Stops accepting requests, lets those in flight finish for up to
        `grace` seconds, then unloads every model."""
        self._stop.set()
        if self.rest_server is not None:
            self.rest_server.shutdown()
        self.grpc_server.stop(grace=grace).wait()
        if self.rest_server is not None:
            self.rest_server.server_close()
        self.models.stop()


def _mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _entries(options):
    """The `ModelEntry`s that `options` name."""
    if options.model_config_file is not None:
        if options.model_base_path is not None:
            raise ValueError("Give --model-config-file or --model-base-path, not both")
        return read_model_config(options.model_config_file)
    if options.model_base_path is None:
        raise ValueError("Give --model-base-path (and --model-name), or --model-config-file")
    # TF Serving's default name.
    name = "default" if options.model_name is None else options.model_name
    if not name:
        raise ValueError("--model-name must not be empty: requests name the model")
    labels = parse_version_labels(options.version_label)
    return [_one_model(options.model_base_path, name, options.version_policy, labels)]


def start(options, entries=None):
    """Starts serving; returns a `Serving`.

    Args:
        options: `ServerOptions`. `port=0` (and `rest_api_port=0`) pick free
            ports. Binds to loopback unless `host` says otherwise.
        entries: the `ModelEntry`s to serve; default: those of the options'
            model config file, or its one model.

    Raises:
        OSError: an address cannot be bound (e.g. the port is in use).
        ValueError: the options name no model, or a bad one.
    """
    if not isinstance(options, ServerOptions):
        raise TypeError(f"start() takes ServerOptions. Received: options={options!r}")
    if entries is None:
        entries = _entries(options)
    if options.xla_cache_dir is not None:
        prefix = xla_cache.enable(options.xla_cache_dir)
        log.info("XLA cache: %s (entries %s__*)", options.xla_cache_dir, prefix)
    limits = request_limits(options)
    session_config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=options.tensorflow_intra_op_parallelism,
        inter_op_parallelism_threads=options.tensorflow_inter_op_parallelism,
    )

    def make_manager(entry):
        return ModelManager(
            entry.base_path, entry.name, entry.version_policy, options.poll_seconds,
            options.batching, entry.labels, num_latest=entry.num_latest,
            session_config=session_config, entry=entry, warmup=options.enable_model_warmup,
        )  # fmt: skip

    models = Models(limits)
    grpc_server = rest_server = rest_port = None
    serving = None
    try:
        grpc_server = GrpcServer(
            models, f"{options.host}:{options.port}", options.predict_threads,
            limits.max_request_bytes + (1 << 20), options.channel_arguments,
            options.grpc_io_nice, options.grpc_hold_cancelling_ms / 1000.0,
        )  # fmt: skip
        if options.rest_api_port is not None:
            rest_server, rest_port = start_rest_server(
                models, options.host, options.rest_api_port, options.rest_threads,
                options.rest_timeout_seconds,
            )  # fmt: skip
        serving = Serving(models, grpc_server, grpc_server.port, rest_server, rest_port,
                          options, make_manager)  # fmt: skip
        serving.apply(entries)
    except BaseException:
        if serving is not None:
            serving.stop()
        else:
            if grpc_server is not None:
                grpc_server.stop(0).wait()
            if rest_server is not None:
                rest_server.shutdown()
                rest_server.server_close()
        raise
    if options.model_config_file is not None:
        serving.watch_config(options.model_config_file,
                             options.model_config_file_poll_wait_seconds)  # fmt: skip
    return serving


def _shorthand_options(host="127.0.0.1", port=8500, rest_api_port=None, poll_seconds=2.0,
                    batching=None, max_workers=None, limits=None, model_config_file=None,
                    config_poll_seconds=60.0, intra_op_threads=0,
                    inter_op_threads=0, warmup=True):  # fmt: skip
    """`ServerOptions` from `start_server`'s keyword arguments."""
    batching = {"max_batch_size": 32, "timeout": 0.005, "split": True, **(batching or {})}
    limits = limits or RequestLimits()
    return ServerOptions(
        host=host, port=port, rest_api_port=rest_api_port, poll_seconds=poll_seconds,
        max_batch_size=batching["max_batch_size"],
        batch_timeout_micros=round(batching["timeout"] * 1e6),
        split_large_requests=batching["split"], grpc_max_threads=max_workers,
        max_request_rows=limits.max_rows, max_string_bytes=limits.max_string_bytes,
        max_request_bytes=limits.max_request_bytes, model_config_file=model_config_file,
        model_config_file_poll_wait_seconds=config_poll_seconds,
        tensorflow_intra_op_parallelism=intra_op_threads,
        tensorflow_inter_op_parallelism=inter_op_threads, enable_model_warmup=warmup,
    )  # fmt: skip


def _one_model(base_path, name, version_policy, version_labels):
    if version_policy not in ("latest", "all") and not isinstance(version_policy, (list, tuple)):
        raise ValueError(
            "`version_policy` must be latest, all or a list of versions. "
            f"Received: {version_policy!r}"
        )
    policy = version_policy if isinstance(version_policy, str) else tuple(version_policy)
    labels = tuple(sorted((version_labels or {}).items()))
    return ModelEntry(name, base_path, policy, version_labels=labels)


def start_server(model_base_path, model_name, version_policy="latest", version_labels=None,
                 **settings):  # fmt: skip
    """Starts serving one model; returns `(grpc_server, bound_port, manager)`.

    A shorthand of `start` for one model: `version_policy` is `"latest"`,
    `"all"` or a list of versions, `version_labels` a `{label: version}`
    dict; the other keyword arguments (`host`, `port`, `rest_api_port`,
    `poll_seconds`, `batching` as `{"max_batch_size", "timeout", "split"}`,
    `max_workers`, `limits` as `RequestLimits`, `intra_op_threads`,
    `inter_op_threads`, `warmup`) are a few `ServerOptions` under short
    names.
    """
    entry = _one_model(model_base_path, model_name, version_policy, version_labels)
    serving = start(_shorthand_options(**settings), [entry])
    return serving.grpc_server, serving.grpc_port, serving.models.manager(model_name)


def serve_forever(options):
    """`keras-transformer serve`: serves until SIGTERM or Ctrl-C, then drains.

    Serves the models that `options` (`ServerOptions`) name. On either
    signal the server accepts no new request, lets the requests in flight
    finish for up to `drain_seconds`, and returns within
    `EXIT_GRACE_SECONDS` more whatever is still running (every thread the
    server starts is a daemon: none holds the process).

    Returns:
        True, once it has served and stopped. A program should then exit
        without waiting for threads (`os._exit`, as the command line does):
        a request stuck in TensorFlow would abort the interpreter's shutdown.
    """
    if not isinstance(options, ServerOptions):
        raise TypeError(f"serve_forever() takes ServerOptions. Received: options={options!r}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    entries = _entries(options)
    serving = start(options, entries)
    names = ", ".join(e.name for e in entries)
    log.info("Serving %s on %s:%s (gRPC)", names, options.host, serving.grpc_port)
    # What loading made lives as long as the server: out of the collector's
    # sight, a full collection no longer stops every thread for 0.4 s.
    collector.freeze_loaded()
    ready = f"READY {options.host}:{serving.grpc_port}"
    if serving.rest_port is not None:
        log.info("REST API on %s:%s", options.host, serving.rest_port)
        ready += f" REST {options.host}:{serving.rest_port}"
    print(ready, flush=True)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGTERM, signal.SIGINT)}  # fmt: skip
    try:
        while not stop.wait(0.5):
            pass
    finally:
        drain = options.drain_seconds
        log.info("Draining: no new requests, up to %.0f s for the ones in flight", drain)
        stopping = threading.Thread(target=serving.stop, args=(drain,), daemon=True)
        stopping.start()
        stopping.join(drain + EXIT_GRACE_SECONDS)
        if stopping.is_alive():
            log.error("Stopping anyway: work was still running %.0f s after the drain",
                      EXIT_GRACE_SECONDS)  # fmt: skip
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.info("Stopped")
    return True
