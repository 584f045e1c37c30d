"""`limits`: a request is checked from its proto before any tensor exists."""

import numpy as np
import pytest
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

from keras_transformer.serving.limits import (
    RequestLimits,
    RequestRejected,
    request_inputs,
    string_input,
    string_list_input,
)
from tests.serving.conftest import string_signature

LIMITS = RequestLimits(max_rows=4, max_string_bytes=5, max_request_bytes=12)


def _tensor(dims, values=(), dtype=types_pb2.DT_STRING, unknown_rank=False):
    shape = tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims],
        unknown_rank=unknown_rank,
    )
    return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape, string_val=list(values))


@pytest.mark.parametrize(
    "tensor,match",
    [
        (_tensor([2], [b"a", b"b"], dtype=types_pb2.DT_INT32), "must be a string tensor"),
        (_tensor([], unknown_rank=True), "unknown rank"),
        (_tensor([-1], [b"a"]), "negative dimension"),
        (_tensor([1, 1], [b"a"]), "rank 1"),
        (_tensor([5], [b"a"] * 5), "--max-request-rows"),
        (_tensor([3], [b"a"]), "carries 1 string values"),
        (_tensor([1], [b"abcdef"]), "--max-string-bytes"),
        (_tensor([3], [b"abcde"] * 3), "--max-request-bytes"),
    ],
)
def test_string_input_refuses_what_breaks_a_limit(tensor, match):
    with pytest.raises(RequestRejected, match=match):
        string_input("text", tensor, 1, LIMITS)


@pytest.mark.parametrize("values", [[], [b"a"], [b"abcde", b"", b"xy", b"z"]])
def test_string_input_gives_the_values_sent(values):
    array = string_input("text", _tensor([len(values)], values), 1, LIMITS)
    assert array.dtype == object and array.tolist() == values


def test_a_declared_shape_is_not_filled_from_one_value():
    # TensorFlow would repeat the one value to fill [4]: refused instead.
    with pytest.raises(RequestRejected, match="declares shape \\[4\\]"):
        string_input("text", _tensor([4], [b"x"]), 1, LIMITS)
    content = _tensor([1])
    content.tensor_content = b"\x00" * 8
    with pytest.raises(RequestRejected, match="carries 0"):
        string_input("text", content, 1, LIMITS)


@pytest.mark.parametrize(
    "values,match",
    [("abc", "list of strings"), ([b"a", "b"], "list of strings"), ([b"a"] * 5, "rows"),
     ([b"abcdef"], "bytes")],
)  # fmt: skip
def test_string_list_input_refuses(values, match):
    with pytest.raises(RequestRejected, match=match):
        string_list_input("text", values, LIMITS)


def test_request_inputs_match_the_signature_by_name_and_rows():
    signature = string_signature("text", "translation")
    arrays = request_inputs({"text": [b"a", b"b"], "translation": [b"c", b"d"]}, signature, LIMITS)
    np.testing.assert_array_equal(arrays["translation"], np.array([b"c", b"d"], object))
    with pytest.raises(RequestRejected, match="missing \\['translation'\\], unknown \\['x'\\]"):
        request_inputs({"text": [b"a"], "x": [b"b"]}, signature, LIMITS)
    with pytest.raises(RequestRejected, match="same number of rows"):
        request_inputs({"text": [b"a"], "translation": [b"c", b"d"]}, signature, LIMITS)


@pytest.mark.parametrize("field", ["max_rows", "max_string_bytes", "max_request_bytes"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_limits_are_positive_ints(field, value):
    with pytest.raises(ValueError, match=field):
        RequestLimits(**{field: value})
