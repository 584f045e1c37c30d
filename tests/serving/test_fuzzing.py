"""Generated requests against a running server: whatever a client sends,
the answer is one of the documented statuses, and a good request sent
right after is still answered correctly.
"""

import json
import socket

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2

from keras_transformer.runtime import SIGNATURES
from keras_transformer.serving.grpc_client import GrpcTranslationClient
from keras_transformer.serving.options import ServerOptions
from keras_transformer.serving.server import start

GRPC_STATUSES = {"OK", "INVALID_ARGUMENT", "NOT_FOUND"}
REST_STATUSES = {200, 400, 404, 413, 501}
GOOD = ["The dog sleeps.", "A small cat sees the old man."]
FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


@pytest.fixture(scope="module")
def server(export_base):
    options = ServerOptions(
        model_base_path=export_base, model_name="translator", port=0, rest_api_port=0,
        poll_seconds=0, max_request_rows=12, max_string_bytes=64, max_request_bytes=400,
        max_batch_size=4, rest_api_timeout_in_ms=20000,
    )  # fmt: skip
    serving = start(options)
    address = f"127.0.0.1:{serving.grpc_port}"
    with GrpcTranslationClient(address, "translator", timeout=60) as client:
        expected = client.translate(GOOD, signature="translate_greedy")["translation"]
    channel = grpc.insecure_channel(address)
    predict = channel.unary_unary(
        "/tensorflow.serving.PredictionService/Predict",
        request_serializer=predict_pb2.PredictRequest.SerializeToString,
        response_deserializer=predict_pb2.PredictResponse.FromString,
    )
    yield {"serving": serving, "address": address, "expected": expected, "predict": predict}
    channel.close()
    serving.stop()


def _still_good(server):
    with GrpcTranslationClient(server["address"], "translator", timeout=60) as client:
        assert (
            client.translate(GOOD, signature="translate_greedy")["translation"]
            == (server["expected"])
        )


_names = st.sampled_from(["text", "translation", "x", ""]) | st.text(max_size=8)
_dims = st.lists(st.integers(-2, 14), max_size=3)


@st.composite
def _tensors(draw):
    dtype = draw(st.sampled_from(sorted(types_pb2.DataType.values())) | st.integers(0, 200))
    tensor = tensor_pb2.TensorProto(dtype=dtype)
    if draw(st.booleans()):
        tensor.tensor_shape.unknown_rank = draw(st.booleans())
        for size in draw(_dims):
            tensor.tensor_shape.dim.append(tensor_shape_pb2.TensorShapeProto.Dim(size=size))
    tensor.string_val.extend(draw(st.lists(st.binary(max_size=80), max_size=16)))
    if draw(st.integers(0, 4)) == 0:
        tensor.int_val.extend(draw(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4)))
    if draw(st.integers(0, 4)) == 0:
        tensor.tensor_content = draw(st.binary(max_size=32))
    return tensor


@st.composite
def _predict_requests(draw):
    request = predict_pb2.PredictRequest()
    spec = request.model_spec
    spec.name = draw(st.sampled_from(["translator", "", "other"]) | st.text(max_size=12))
    spec.signature_name = draw(st.sampled_from([*SIGNATURES, "", "bogus"]) | st.text(max_size=8))
    choice = draw(st.sampled_from(["none", "version", "label"]))
    if choice == "version":
        spec.version.value = draw(st.sampled_from([0, 1, 2]) | st.integers(-(2**63), 2**63 - 1))
    elif choice == "label":
        spec.version_label = draw(st.text(max_size=8))
    for name, tensor in draw(st.dictionaries(_names, _tensors(), max_size=3)).items():
        request.inputs[name].CopyFrom(tensor)
    request.output_filter.extend(draw(st.lists(_names, max_size=2)))
    return request


@FUZZ
@given(request=_predict_requests())
def test_any_predict_request_gets_a_documented_status(server, request):
    try:
        server["predict"](request, timeout=60)
        code = "OK"
    except grpc.RpcError as error:
        code = error.code().name
    assert code in GRPC_STATUSES, (code, request)
    _still_good(server)


_json = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=25,
)
_strings = st.text(max_size=30) | st.builds(lambda s: {"b64": s}, st.text(max_size=12))
_near_valid = st.fixed_dictionaries(
    {"instances": st.lists(_strings | st.dictionaries(_names, _strings, max_size=2), max_size=14)}
) | st.fixed_dictionaries(
    {"inputs": st.dictionaries(_names, st.lists(_strings, max_size=14), max_size=2)
     | st.lists(_strings, max_size=14)}
)  # fmt: skip


@st.composite
def _bodies(draw):
    kind = draw(st.sampled_from(["json", "near", "bytes", "deep"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "deep":
        depth = draw(st.integers(1, 50_000))
        return b"[" * depth + b"]" * draw(st.sampled_from([depth, 0]))
    value = draw(_json) if kind == "json" else draw(_near_valid)
    if isinstance(value, dict) and draw(st.booleans()):
        value["signature_name"] = draw(st.sampled_from([*SIGNATURES, "x"]) | st.text(max_size=6))
    return json.dumps(value).encode()


_paths = st.sampled_from([
    "/v1/models/translator:predict", "/v1/models/translator/versions/1:predict",
    "/v1/models/translator/labels/stable:predict", "/v1/models/translator:classify",
    "/v1/models/nope:predict", "/v1/models/translator/versions/99999999999999999999:predict",
    "/v1/models/:predict", "/v2/x", "/v1/models/translator/metadata",
]) | st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=40).map(
    lambda s: "/" + s
)  # fmt: skip
_header_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30)
_headers = st.dictionaries(
    st.sampled_from(["Content-Type", "Accept", "Expect", "X-Anything", "Transfer-Encoding",
                     "Connection"]),
    _header_text, max_size=3,
)  # fmt: skip


@FUZZ
@given(method=st.sampled_from(["POST", "GET", "PUT"]), path=_paths, body=_bodies(),
       headers=_headers)  # fmt: skip
def test_any_rest_request_gets_a_documented_json_answer(server, method, path, body, headers):
    chunked = bool(headers.pop("Transfer-Encoding", None))
    head = f"{method} {path} HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    if chunked:
        payload = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
        head += "Transfer-Encoding: chunked\r\n"
    else:
        payload = body
        head += f"Content-Length: {len(body)}\r\n"
    with socket.create_connection(("127.0.0.1", server["serving"].rest_port), timeout=60) as sock:
        try:
            sock.sendall(head.encode("latin-1") + b"\r\n" + payload)
        except OSError:  # the server may answer and close before it has read it all
            pass
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    status_line, _, rest = received.partition(b"\r\n")
    status = int(status_line.split(b" ")[1])
    data = rest.partition(b"\r\n\r\n")[2]
    assert status in REST_STATUSES, (status, data[:300])
    if path.endswith("metrics") and status == 200:
        return
    answer = json.loads(data)
    assert isinstance(answer, dict)
    if status != 200:
        assert isinstance(answer["error"], str)
    _still_good(server)
