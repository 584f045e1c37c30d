"""`ServerOptions`: every setting of the server in one object.

TF Serving parses its flags into one `Server::Options` and hands it to
`BuildAndStart`; `keras-transformer serve` derives its flags from this
dataclass (as `train` does from `TrainConfig`) and hands it to `start` or
`serve_forever`. It imports neither TensorFlow nor gRPC, so that the
command line can describe itself without loading them.
"""

import dataclasses
import os

from keras_transformer._validation import (
    check_nice_steps,
    check_non_negative_int,
    check_non_negative_number,
    check_port,
    check_positive_int,
    check_positive_number,
    options_from_dict,
)
from keras_transformer._version_folders import parse_version_folder

VERSION_POLICIES = ("latest", "all")
# gRPC server arguments set unless --grpc-channel-arguments says otherwise.
# gRPC's core cancels arriving calls, of every connection, at random once
# 1000 calls wait for the server to take them, and all of them at 3000:
# under a flood of expiring calls that queue fills for moments while the
# server answers them, and well-behaved clients lost calls (CANCELLED). The
# calls that wait are dropped by the core once their deadline passes.
# A flood from a CPU of its own still outruns the server's one Python
# thread that takes calls, and fills even that queue: each connection may
# hold at most 100 streams (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS, the
# RFC's smallest recommended value), and gRPC's core counts a stream its
# client reset until the server takes its call, so a connection that opens
# and resets streams faster than they are taken is refused more
# (REFUSED_STREAM, UNAVAILABLE to its client) and the queue stays short.
DEFAULT_GRPC_CHANNEL_ARGUMENTS = {
    "grpc.server.max_pending_requests": 20000,
    "grpc.server.max_pending_requests_hard_limit": 40000,
    "grpc.max_concurrent_streams": 100,
}


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclasses.dataclass
class ServerOptions:
    """The settings of `keras-transformer serve`; the keys of its `--config`.

    Attributes:
        model_base_path: folder of the model's version folders (required
            without model_config_file).
        model_name: the name requests use for the model, without
            model_config_file. None: `default`, as TF Serving's.
        model_config_file: a model_config_list (TF Serving's text format)
            of the models to serve, instead of model_base_path and
            model_name. A changed file is applied whole or not at all.
        model_config_file_poll_wait_seconds: how often the model config
            file is re-read if it changed.
        host: address to bind; 127.0.0.1 is this machine only.
        port: gRPC port; 0 picks a free one.
        rest_api_port: also serve TF Serving's REST API on this port;
            None for no REST, 0 picks a free one.
        poll_seconds: how often version folders are scanned; 0 never.
        version_policy: serve the newest version, or every version under
            the base path.
        version_label: LABEL=VERSION, a label requests may name instead of
            a version; repeatable.
        max_request_rows: most sentences in one request.
        max_string_bytes: longest sentence, in bytes.
        max_request_bytes: most text bytes in one request.
        max_batch_size: most sentences in one batched run.
        batch_timeout_micros: how long a request waits for others to batch
            with.
        split_large_requests: split requests larger than the room left in a
            batch: their rows fill what small requests leave, the rest
            waits behind what arrived meanwhile; off refuses requests over
            max_batch_size.
        drain_seconds: on SIGTERM or Ctrl-C, how long requests in flight
            may finish; the server exits at most a few seconds later,
            whatever is still running.
        tensorflow_intra_op_parallelism: threads of each session within
            one op, as TF Serving's flag; 0 is TensorFlow's choice; 1 both
            ways answers single requests sooner on a small CPU.
        tensorflow_inter_op_parallelism: threads of each session running
            ops side by side, as TF Serving's flag; 0 is TensorFlow's
            choice.
        grpc_max_threads: gRPC Predict calls run at once, as TF Serving's
            flag; more wait their turn. Status and metadata calls never
            wait for them. None is 4 per CPU.
        grpc_channel_arguments: gRPC server arguments, as TF Serving's
            flag: NAME=VALUE pairs separated by commas (integers where they
            read as one), e.g. grpc.max_connection_age_ms=60000. They
            override the server's own, which let 20000 calls wait for the
            server (`grpc.server.max_pending_requests`; hard limit 40000)
            where gRPC cancels arriving calls past 1000, and let each
            connection hold 100 streams (`grpc.max_concurrent_streams`),
            unlimited in gRPC.
        grpc_io_nice: how many `nice` steps below the model the thread
            that takes gRPC calls and gRPC's I/O threads run (Linux; 0 to
            19; 0 leaves them level): under a flood of calls that expire or
            are cancelled, the flood then gets the CPU the model leaves, and
            a well-behaved call is taken as soon as the model is idle. 10
            by default: 19 starved them behind other processes of the
            machine (a flood from the same machine kept well-behaved calls
            waiting 11-16x longer than without it, against 4x at 10).
        grpc_hold_cancelling_ms: the longest a call of a connection whose
            client cancelled most of its recent calls (three in four,
            weighted to the last eight or so) waits before any work: about
            twice as long as that connection's calls lived, at least 50 ms.
            A call its client cancels meanwhile gets no thread and no model
            work; one still wanted then runs when no other request waits,
            one sentence a batch, so that a cancel not yet read costs
            others at most one sentence's run. 0 holds none.
        rest_api_num_threads: REST requests worked on at once, as TF
            Serving's flag; more wait their turn. None is 4 per CPU.
        rest_api_timeout_in_ms: a REST request's time, as TF Serving's
            flag: a connection that has not sent a whole request this long
            after its last answer is closed, and a request still working
            after this long is answered 504.
        enable_model_warmup: replay each version's warmup records
            (`assets.extra/tf_serving_warmup_requests`) before it serves,
            as TF Serving's flag; off, a version serves once loaded and its
            first requests pay the first runs.
        xla_cache_dir: a folder where TensorFlow keeps the XLA programs
            that `--jit-compile` versions compile as they load, so that a
            restart, or another server on the same kind of machine, reads
            them instead of compiling (TensorFlow's persistent XLA cache);
            None compiles at every load.
    """

    model_base_path: str | None = None
    model_name: str | None = None
    model_config_file: str | None = None
    model_config_file_poll_wait_seconds: float = 60.0
    host: str = "127.0.0.1"
    port: int = 8500
    rest_api_port: int | None = None
    poll_seconds: float = 2.0
    version_policy: str = dataclasses.field(
        default="latest", metadata={"choices": VERSION_POLICIES}
    )
    version_label: list = dataclasses.field(
        default_factory=list, metadata={"repeatable": True, "metavar": "LABEL=VERSION"}
    )
    max_request_rows: int = 4096
    max_string_bytes: int = 16 * 1024
    max_request_bytes: int = 8 * 1024 * 1024
    max_batch_size: int = 32
    batch_timeout_micros: int = 5000
    split_large_requests: bool = True
    drain_seconds: float = 30.0
    tensorflow_intra_op_parallelism: int = dataclasses.field(default=0, metadata={"int32": True})
    tensorflow_inter_op_parallelism: int = dataclasses.field(default=0, metadata={"int32": True})
    grpc_max_threads: int | None = None
    grpc_channel_arguments: str = ""
    grpc_io_nice: int = 10
    grpc_hold_cancelling_ms: int = 250
    rest_api_num_threads: int | None = None
    rest_api_timeout_in_ms: int = 30000
    enable_model_warmup: bool = True
    xla_cache_dir: str | None = None

    # `tensorflow_model_server`'s own flag of each setting that has one: the
    # command line takes it too (`--model_base_path=/models/x`), so that a
    # TF Serving command line runs unchanged but for the program's name.
    TF_SERVING_FLAGS = {
        name: name
        for name in ("model_base_path", "model_name", "model_config_file",
                     "model_config_file_poll_wait_seconds", "port", "rest_api_port",
                     "tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism",
                     "grpc_max_threads", "grpc_channel_arguments", "rest_api_num_threads",
                     "rest_api_timeout_in_ms")
    } | {"poll_seconds": "file_system_poll_wait_seconds"}  # fmt: skip

    def __post_init__(self):
        for name in ("max_request_rows", "max_string_bytes", "max_request_bytes",
                     "max_batch_size", "rest_api_timeout_in_ms"):  # fmt: skip
            check_positive_int(name, getattr(self, name))
        for name in ("grpc_max_threads", "rest_api_num_threads"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        for name in ("batch_timeout_micros", "grpc_hold_cancelling_ms"):
            check_non_negative_int(name, getattr(self, name))
        check_port("port", self.port)
        if self.rest_api_port is not None:
            check_port("rest_api_port", self.rest_api_port)
        check_positive_number(
            "model_config_file_poll_wait_seconds", self.model_config_file_poll_wait_seconds
        )
        for name in ("drain_seconds", "poll_seconds"):
            check_non_negative_number(name, getattr(self, name))
        if self.version_policy not in VERSION_POLICIES:
            raise ValueError(
                f"`version_policy` must be one of {VERSION_POLICIES}. "
                f"Received: version_policy={self.version_policy!r}"
            )
        if isinstance(self.version_label, str):
            self.version_label = [self.version_label]
        parse_version_labels(self.version_label)
        parse_channel_arguments(self.grpc_channel_arguments)
        check_nice_steps("grpc_io_nice", self.grpc_io_nice)

    @property
    def channel_arguments(self):
        """`[(name, value)]` of the gRPC server: the defaults, then
        `grpc_channel_arguments` over them."""
        values = {**DEFAULT_GRPC_CHANNEL_ARGUMENTS,
                  **parse_channel_arguments(self.grpc_channel_arguments)}  # fmt: skip
        return sorted(values.items())

    @property
    def version_labels(self):
        """`{label: version}` of `version_label`."""
        return parse_version_labels(self.version_label)

    @classmethod
    def from_dict(cls, values):
        """Options from a `--config` file's keys; unknown keys are errors."""
        return options_from_dict(cls, values, "serve")

    @property
    def predict_threads(self):
        """gRPC Predict calls run at once."""
        return self.grpc_max_threads or 4 * _cpus()

    @property
    def rest_threads(self):
        """REST requests worked on at once."""
        return self.rest_api_num_threads or 4 * _cpus()

    @property
    def rest_timeout_seconds(self):
        return self.rest_api_timeout_in_ms / 1000.0

    @property
    def batching(self):
        """The `Batcher` options."""
        return {
            "max_batch_size": self.max_batch_size,
            "timeout": self.batch_timeout_micros / 1e6,
            "split": self.split_large_requests,
        }


def check_labels(labels):
    """`labels` (`{label: version}`) as a dict, after checking each one."""
    for label, version in labels.items():
        if not isinstance(label, str) or not label:
            raise ValueError(f"A version label must be a non-empty string. Received: {label!r}")
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(
                f"Version label {label!r} must name a version number >= 0. Received: {version!r}"
            )
    return dict(labels)


def parse_version_labels(pairs):
    """`["stable=1", "canary=2"]` -> `{"stable": 1, "canary": 2}`.

    Example:

    >>> parse_version_labels(["stable=1", "canary=2"])
    {'stable': 1, 'canary': 2}
    """
    labels = {}
    for pair in pairs or ():
        label, sep, version = pair.partition("=") if isinstance(pair, str) else ("", "", "")
        if not sep or parse_version_folder(version.strip()) is None:
            raise ValueError(f"A version label is LABEL=VERSION, e.g. stable=1. Received: {pair!r}")
        if label in labels:
            raise ValueError(f"Version label {label!r} is given twice")
        labels[label] = int(version)
    return check_labels(labels)


def parse_channel_arguments(text):
    """TF Serving's `--grpc_channel_arguments`: `"a=1,b=x"` -> `{"a": 1, "b": "x"}`.

    Example:

    >>> parse_channel_arguments("grpc.max_connection_age_ms=60000,grpc.primary_user_agent=me")
    {'grpc.max_connection_age_ms': 60000, 'grpc.primary_user_agent': 'me'}
    """
    if not isinstance(text, str):
        raise ValueError(f"grpc_channel_arguments is NAME=VALUE,... text. Received: {text!r}")
    values = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = (part.strip() for part in pair.partition("="))
        if not sep or not name or not value:
            raise ValueError(
                f"A gRPC channel argument is NAME=VALUE, e.g. grpc.max_connection_age_ms=60000. "
                f"Received: {pair!r}"
            )
        try:
            values[name] = int(value)
        except ValueError:
            values[name] = value
    return values
