"""A TF Serving gRPC client for exported translators.

Works against `tensorflow_model_server` and `keras-transformer serve`
alike, through `tensorflow-serving-api`.

Example, against `keras-transformer serve` started here on a free port
(`tensorflow_model_server --port=8500 ...` is called the same way):

>>> from keras_transformer.serving import ServerOptions
>>> from keras_transformer.serving.server import start
>>> serving = start(ServerOptions(export_base, "translator", port=0))
>>> with GrpcTranslationClient(f"localhost:{serving.grpc_port}", "translator") as client:
...     outputs = client.translate(["The child sleeps."])
>>> sorted(outputs), outputs["version"], type(outputs["translation"][0])
(['score', 'translation', 'version'], 1, <class 'str'>)
>>> serving.stop()
"""

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from keras_transformer._validation import check_positive_number, split_address


def _decode(array):
    if array.dtype == object:
        return (
            np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array).tolist()
            if array.size
            else array.tolist()
        )
    return array.tolist()


class GrpcTranslationClient:
    """`PredictionService.Predict`/`GetModelMetadata` and `ModelService.GetModelStatus`.

    Args:
        server: `host:port` of the gRPC endpoint.
        model: the model name.
        timeout: seconds per call; None waits as long as the call takes.
    """

    def __init__(self, server, model, timeout=30.0):
        if timeout is not None:
            check_positive_number("timeout", timeout)  # gRPC fails 0 and less at once
        split_address(server, "server")  # refuses a port gRPC would wrap round
        self.server = server
        self.model = model
        self.timeout = timeout
        self.channel = grpc.insecure_channel(
            server, options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        )
        self.prediction = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)
        self.models = model_service_pb2_grpc.ModelServiceStub(self.channel)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.channel.close()

    def _spec(self, spec, version=None, signature=None, version_label=None):
        spec.name = self.model
        if version is not None and version_label is not None:
            raise ValueError(
                f"Name a version or a version label, not both. Received: {version!r}, "
                f"{version_label!r}"
            )
        if version is not None:
            spec.version.value = version
        if version_label is not None:
            spec.version_label = version_label
        if signature:
            spec.signature_name = signature

    def predict(self, inputs, signature="serving_default", version=None, version_label=None):
        """Raw Predict: `inputs` maps names to numpy arrays; returns
        `(outputs dict of numpy arrays, served version)`."""
        request = predict_pb2.PredictRequest()
        self._spec(request.model_spec, version, signature, version_label)
        for key, value in inputs.items():
            request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
        response = self.prediction.Predict(request, timeout=self.timeout)
        outputs = {k: tf.make_ndarray(v) for k, v in response.outputs.items()}
        return outputs, response.model_spec.version.value

    def translate(self, sentences, signature="serving_default", version=None, version_label=None):
        """Translates a list of str; returns the signature's outputs decoded
        to Python lists (strings as str), plus `version`."""
        text = np.array([s.encode("utf-8") for s in sentences], dtype=object)
        outputs, served = self.predict({"text": text}, signature, version, version_label)
        result = {k: _decode(v) for k, v in outputs.items()}
        result["version"] = served
        return result

    def score(self, sentences, translations, version=None, version_label=None):
        """The `score` signature: `{"log_prob": [...], "length": [...],
        "version": int}` of each translation of each sentence."""
        if len(sentences) != len(translations):
            raise ValueError(
                f"One translation a sentence: received {len(sentences)} sentences and "
                f"{len(translations)} translations"
            )
        inputs = {
            "text": np.array([s.encode("utf-8") for s in sentences], dtype=object),
            "translation": np.array([t.encode("utf-8") for t in translations], dtype=object),
        }
        outputs, served = self.predict(inputs, "score", version, version_label)
        return {**{k: _decode(v) for k, v in outputs.items()}, "version": served}

    def metadata(self, version=None, version_label=None):
        """The served signatures, as a `SignatureDefMap`."""
        request = get_model_metadata_pb2.GetModelMetadataRequest()
        self._spec(request.model_spec, version, version_label=version_label)
        request.metadata_field.append("signature_def")
        response = self.prediction.GetModelMetadata(request, timeout=self.timeout)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signatures)
        return signatures

    def status(self, version=None, version_label=None):
        """`[(version, state name)]` of the model's versions."""
        request = get_model_status_pb2.GetModelStatusRequest()
        self._spec(request.model_spec, version, version_label=version_label)
        response = self.models.GetModelStatus(request, timeout=self.timeout)
        states = get_model_status_pb2.ModelVersionStatus.State
        return [(s.version, states.Name(s.state)) for s in response.model_version_status]
