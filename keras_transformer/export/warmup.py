"""TF Serving's warmup records: requests replayed when a version loads.

TensorFlow Serving reads `assets.extra/tf_serving_warmup_requests` in a
SavedModel, a TFRecord file of `PredictionLog` protos (at most 1,000), and
runs each request before the version serves, so that the first client does
not pay for building the kernels. The export writes one (a few requests per
signature, of the batch sizes clients send), and `keras-transformer serve`
replays it as TF Serving does (`runtime.warmup_records` reads it).
"""

import os

import numpy as np
import tensorflow as tf

from keras_transformer._extras import require
from keras_transformer.runtime.warmup_records import MAX_RECORDS, WARMUP_PATH

# Neutral inputs of a few lengths: warmup builds kernels, any text will do.
DEFAULT_SENTENCES = (
    "Hello.",
    "A man is reading a book in the park.",
    "Two young children are playing with a red ball on the green grass near the old house.",
)


def predict_request(signature, inputs):
    """A `PredictRequest` of `signature` with string inputs.

    Args:
        signature: the signature name.
        inputs: a dict of input names to lists of str (one batch).
    """
    predict_pb2 = require("tensorflow_serving.apis.predict_pb2", "serving")
    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = signature
    for name, texts in inputs.items():
        array = np.array([t.encode("utf-8") for t in texts], dtype=object)
        request.inputs[name].CopyFrom(tf.make_tensor_proto(array, shape=[len(texts)]))
    return request


def warmup_requests(signatures, sentences=DEFAULT_SENTENCES, batch_sizes=(1, 8)):
    """One request of each of `batch_sizes` for every signature.

    Args:
        signatures: the signature names to warm up (input `text`), or a
            dict of signature names to their string input names (each
            input gets the same sentences).
        sentences: inputs, cycled to fill each batch.
        batch_sizes: one request of each size per signature.

    Returns:
        A list of `PredictRequest`s.
    """
    if isinstance(signatures, dict):
        signatures = signatures.items()
    else:
        signatures = [(name, ("text",)) for name in signatures]
    requests = []
    for signature, inputs in signatures:
        for size in batch_sizes:
            text = [sentences[i % len(sentences)] for i in range(size)]
            values = {name: text for name in inputs}
            if "target_prefix" in values:  # a prefix of a word or none
                values["target_prefix"] = [t.split(" ")[0] if i % 2 else "" for i, t in
                                           enumerate(text)]  # fmt: skip
            requests.append(predict_request(signature, values))
    return requests


def write_warmup_requests(export_dir, signatures, sentences=DEFAULT_SENTENCES, batch_sizes=(1, 8)):
    """Writes the warmup file of `export_dir` with `warmup_requests`'
    requests (arguments as there).

    Returns:
        The file's path.
    """
    return write_warmup_file(export_dir, warmup_requests(signatures, sentences, batch_sizes))


def write_warmup_file(export_dir, requests):
    """Writes `requests` (`PredictRequest`s) as the warmup file of
    `export_dir`; returns its path.

    Raises:
        ValueError: more than `MAX_RECORDS` requests.
    """
    apis = require("tensorflow_serving.apis.prediction_log_pb2", "serving")
    if len(requests) > MAX_RECORDS:
        raise ValueError(f"At most {MAX_RECORDS} warmup requests; received {len(requests)}")
    path = os.path.join(export_dir, WARMUP_PATH)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for request in requests:
            log = apis.PredictionLog(predict_log=apis.PredictLog(request=request))
            writer.write(log.SerializeToString())
    return path
