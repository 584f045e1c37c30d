"""What one request may cost, checked from the proto before any tensor exists."""

import dataclasses

import numpy as np
from tensorflow.core.framework import types_pb2

from keras_transformer._validation import check_positive_int


class RequestRejected(ValueError):
    """A request breaks a limit or does not fit its signature (TF Serving:
    INVALID_ARGUMENT); the message names what was wrong."""


@dataclasses.dataclass(frozen=True)
class RequestLimits:
    """Per-request limits of the server (`keras-transformer serve` flags).

    Attributes:
        max_rows: most rows (sentences) in one request; larger requests run
            as batch-sized pieces up to this many rows.
        max_string_bytes: longest string, in bytes.
        max_request_bytes: most string bytes in one request.
    """

    max_rows: int = 4096
    max_string_bytes: int = 16 * 1024
    max_request_bytes: int = 8 * 1024 * 1024

    def __post_init__(self):
        for field in dataclasses.fields(self):
            check_positive_int(field.name, getattr(self, field.name))


def _declared_shape(name, proto):
    shape = proto.tensor_shape
    if shape.unknown_rank:
        raise RequestRejected(f"Input {name!r} has no shape (unknown rank)")
    dims = [d.size for d in shape.dim]
    if any(d < 0 for d in dims):
        raise RequestRejected(f"Input {name!r} declares a negative dimension: {dims}")
    return dims


def string_input(name, proto, rank, limits):
    """The string tensor of input `name`, after every check.

    Args:
        name: the input's name (for messages).
        proto: its `TensorProto`.
        rank: the rank the signature takes.
        limits: `RequestLimits`.

    Returns:
        A NumPy object array of bytes.

    Raises:
        RequestRejected: naming the dtype, rank, shape or limit that failed.
    """
    if proto.dtype != types_pb2.DT_STRING:
        raise RequestRejected(
            f"Input {name!r} must be a string tensor; received "
            f"{types_pb2.DataType.Name(proto.dtype)}"
        )
    dims = _declared_shape(name, proto)
    if len(dims) != rank:
        raise RequestRejected(f"Input {name!r} must have rank {rank}; received shape {dims}")
    declared = int(np.prod(dims, dtype=np.int64)) if dims else 1
    rows = dims[0] if dims else 1
    if rows > limits.max_rows:
        raise RequestRejected(
            f"Input {name!r} has {rows} rows, over the limit of {limits.max_rows} "
            "(--max-request-rows)"
        )
    values = proto.string_val
    if proto.tensor_content or len(values) != declared:
        # TensorFlow would repeat the last value (or zeros) to fill the
        # declared shape: a few bytes could ask for gigabytes.
        raise RequestRejected(
            f"Input {name!r} declares shape {dims} ({declared} values) but carries "
            f"{len(values)} string values"
        )
    total = 0
    for index, value in enumerate(values):
        if len(value) > limits.max_string_bytes:
            raise RequestRejected(
                f"Input {name!r} string {index} has {len(value)} bytes, over the limit of "
                f"{limits.max_string_bytes} (--max-string-bytes)"
            )
        total += len(value)
    if total > limits.max_request_bytes:
        raise RequestRejected(
            f"Input {name!r} has {total} string bytes, over the limit of "
            f"{limits.max_request_bytes} (--max-request-bytes)"
        )
    array = np.empty(declared, dtype=object)
    array[:] = list(values)
    return array.reshape(dims)


def request_inputs(request_inputs_map, signature, limits):
    """Checks a request's inputs against `signature` (a `SignatureDef`)
    and the limits; returns `{name: NumPy array}`.

    Only string inputs are served (every signature of the export takes
    string `text`).
    """
    expected = set(signature.inputs)
    received = set(request_inputs_map)
    if expected != received:
        raise RequestRejected(
            f"The signature takes inputs {sorted(expected)}; missing "
            f"{sorted(expected - received)}, unknown {sorted(received - expected)}"
        )
    arrays = {}
    for name in sorted(expected):
        info = signature.inputs[name]
        if info.dtype != types_pb2.DT_STRING or info.tensor_shape.unknown_rank:
            raise RequestRejected(f"Input {name!r} of this signature is not a served string input")
        arrays[name] = string_input(
            name, request_inputs_map[name], len(info.tensor_shape.dim), limits
        )
    return arrays
