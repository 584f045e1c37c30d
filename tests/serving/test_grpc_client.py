"""`GrpcTranslationClient` against a recording stand-in of TF Serving's
gRPC services: the requests it builds, the outputs it decodes, and the
mistakes it refuses before anything is sent. (The real servers answer it
in `test_server.py` and `test_end_to_end.py`.)"""

import re
import threading
from concurrent import futures

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from keras_transformer.serving.grpc_client import GrpcTranslationClient


class _Recorder(
    prediction_service_pb2_grpc.PredictionServiceServicer,
    model_service_pb2_grpc.ModelServiceServicer,
):
    def __init__(self):
        self.requests = []
        self.release = threading.Event()
        self.release.set()

    def Predict(self, request, context):
        self.requests.append(request)
        self.release.wait(10)
        text = tf.make_ndarray(request.inputs["text"])
        response = predict_pb2.PredictResponse()
        response.model_spec.version.value = 3
        # Each sentence back, reversed, as TF Serving returns strings: bytes.
        reversed_text = np.array([t.decode()[::-1].encode() for t in text], dtype=object)
        response.outputs["translation"].CopyFrom(tf.make_tensor_proto(reversed_text))
        response.outputs["score"].CopyFrom(
            tf.make_tensor_proto(np.arange(len(text), dtype="float32"))
        )
        return response

    def GetModelMetadata(self, request, context):
        self.requests.append(request)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        signatures.signature_def["serving_default"].method_name = "tensorflow/serving/predict"
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.metadata["signature_def"].Pack(signatures)
        return response

    def GetModelStatus(self, request, context):
        self.requests.append(request)
        response = get_model_status_pb2.GetModelStatusResponse()
        states = get_model_status_pb2.ModelVersionStatus.State
        for version, state in ((1, states.END), (2, states.AVAILABLE)):
            response.model_version_status.add(version=version, state=state)
        return response


@pytest.fixture()
def served():
    recorder = _Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(recorder, server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(recorder, server)
    port = server.add_insecure_port("localhost:0")
    server.start()
    with GrpcTranslationClient(f"localhost:{port}", "translator", timeout=5) as client:
        yield client, recorder
    recorder.release.set()
    server.stop(None)


@pytest.mark.parametrize(
    "version,label,signature",
    [(None, None, "serving_default"), (2, None, "translate_greedy"), (None, "stable", "attention")],
)
def test_translate_sends_utf8_text_and_decodes_strings(served, version, label, signature):
    client, recorder = served
    sentences = ["Die Katze schläft.", "", "naïve café"]
    result = client.translate(sentences, signature, version=version, version_label=label)
    assert result == {
        "translation": [s[::-1] for s in sentences],
        "score": [0.0, 1.0, 2.0],
        "version": 3,
    }
    (request,) = recorder.requests
    spec = request.model_spec
    assert (spec.name, spec.signature_name) == ("translator", signature)
    assert spec.HasField("version") == (version is not None) and spec.version.value == (
        version or 0
    )
    assert spec.version_label == (label or "")
    assert tf.make_ndarray(request.inputs["text"]).tolist() == [s.encode() for s in sentences]


def test_an_empty_batch_decodes_to_empty_lists(served):
    client, _ = served
    assert client.translate([]) == {"translation": [], "score": [], "version": 3}


def test_score_sends_both_inputs_row_by_row(served):
    client, recorder = served
    client.score(["a b", "c"], ["x", "y z"])
    (request,) = recorder.requests
    assert request.model_spec.signature_name == "score"
    assert tf.make_ndarray(request.inputs["translation"]).tolist() == [b"x", b"y z"]


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.translate(["a"], version=1, version_label="stable"),
        lambda c: c.metadata(version=1, version_label="stable"),
        lambda c: c.status(version=1, version_label="stable"),
        lambda c: c.score(["a", "b"], ["x"]),
    ],
    ids=["translate", "metadata", "status", "score rows"],
)
def test_mistakes_are_refused_before_anything_is_sent(served, call):
    client, recorder = served
    with pytest.raises(ValueError):
        call(client)
    assert recorder.requests == []


def test_metadata_and_status(served):
    client, recorder = served
    assert list(client.metadata(version_label="stable").signature_def) == ["serving_default"]
    assert list(recorder.requests[0].metadata_field) == ["signature_def"]
    assert client.status() == [(1, "END"), (2, "AVAILABLE")]
    assert recorder.requests[1].model_spec.name == "translator"


@pytest.mark.parametrize("timeout", [0, -1, True, "30", float("inf"), float("nan")])
def test_a_timeout_is_a_positive_number(timeout):
    # gRPC fails a call of a deadline already past without sending it, and
    # one of an infinite deadline too (DEADLINE_EXCEEDED at once).
    with pytest.raises(ValueError, match="`timeout` must be a positive number"):
        GrpcTranslationClient("127.0.0.1:8500", "translator", timeout=timeout)


@pytest.mark.parametrize("server", ["127.0.0.1:65536", "localhost:99999", "[::1]:123456"])
def test_a_port_past_65535_is_refused(server):
    # gRPC would wrap it round: 99999 dials port 34463.
    with pytest.raises(ValueError, match=f"^server {re.escape(server)}: a port is at most 65535$"):
        GrpcTranslationClient(server, "translator")
    GrpcTranslationClient(server.rpartition(":")[0] + ":65535", "translator").close()


def test_a_call_past_its_timeout_fails_with_deadline_exceeded(served):
    client, recorder = served
    client.timeout = 0.2
    recorder.release.clear()
    with pytest.raises(grpc.RpcError) as caught:
        client.translate(["a"])
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
