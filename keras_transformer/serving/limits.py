"""What one request may cost, checked from the proto before any tensor exists."""

import dataclasses

import numpy as np
from tensorflow.core.framework import types_pb2

from keras_transformer._validation import check_positive_int, shown_names


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
    _check_rows(name, dims[0] if dims else 1, limits)
    values = proto.string_val
    if proto.tensor_content or len(values) != declared:
        # TensorFlow would repeat the last value (or zeros) to fill the
        # declared shape: a few bytes could ask for gigabytes.
        raise RequestRejected(
            f"Input {name!r} declares shape {dims} ({declared} values) but carries "
            f"{len(values)} string values"
        )
    _check_strings(name, values, limits)
    array = np.empty(declared, dtype=object)
    array[:] = list(values)
    return array.reshape(dims)


def _check_rows(name, rows, limits):
    if rows > limits.max_rows:
        raise RequestRejected(
            f"Input {name!r} has {rows} rows, over the limit of {limits.max_rows} "
            "(--max-request-rows)"
        )


def _check_strings(name, values, limits):
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


def string_list_input(name, values, limits):
    """A rank-1 string input given as a list of `bytes` (the REST API's
    decoded JSON), after the same checks as `string_input`."""
    if not isinstance(values, list) or not all(isinstance(v, bytes) for v in values):
        raise RequestRejected(f"Input {name!r} must be a list of strings")
    _check_rows(name, len(values), limits)
    _check_strings(name, values, limits)
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def request_inputs(request_inputs_map, signature, limits):
    """Checks a request's inputs against `signature` (a `SignatureDef`)
    and the limits; returns `{name: NumPy array}`.

    `request_inputs_map` maps names to `TensorProto`s (gRPC) or to lists of
    `bytes` (REST). Only string inputs are served (every signature of the
    export takes string `text`, and `score` also `translation`), all with
    the same number of rows.
    """
    expected = set(signature.inputs)
    received = set(request_inputs_map)
    if expected != received:
        raise RequestRejected(
            f"The signature takes inputs {sorted(expected)}; missing "
            f"{sorted(expected - received)}, unknown {shown_names(sorted(received - expected))}"
        )
    arrays = {}
    for name in sorted(expected):
        info = signature.inputs[name]
        if info.dtype != types_pb2.DT_STRING or info.tensor_shape.unknown_rank:
            raise RequestRejected(f"Input {name!r} of this signature is not a served string input")
        rank = len(info.tensor_shape.dim)
        value = request_inputs_map[name]
        if isinstance(value, list):
            if rank != 1:
                raise RequestRejected(f"Input {name!r} must have rank {rank}")
            arrays[name] = string_list_input(name, value, limits)
        else:
            arrays[name] = string_input(name, value, rank, limits)
    rows = {name: len(array) for name, array in arrays.items()}
    if len(set(rows.values())) > 1:
        # Rows are matched by position (`score`'s text and translation).
        raise RequestRejected(f"The inputs must have the same number of rows. Received: {rows}")
    return arrays
