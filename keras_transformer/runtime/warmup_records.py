"""TF Serving's warmup records, read back as a server replays them.

TensorFlow Serving reads `assets.extra/tf_serving_warmup_requests` in a
SavedModel, a TFRecord file of `PredictionLog` protos (at most 1,000), and
runs each request before the version serves. The exporter writes the file
(`export.warmup`); `keras-transformer serve` reads it here.
"""

import os

import tensorflow as tf

from keras_transformer._extras import require

WARMUP_PATH = os.path.join("assets.extra", "tf_serving_warmup_requests")
MAX_RECORDS = 1000  # TF Serving reads no more


def read_warmup_requests(export_dir):
    """The `PredictRequest`s of `export_dir`'s warmup file (none if absent).

    Raises:
        ValueError: a record is not a `PredictionLog` with a predict request,
            or there are more than `MAX_RECORDS`.
    """
    path = os.path.join(export_dir, WARMUP_PATH)
    if not os.path.exists(path):
        return []
    apis = require("tensorflow_serving.apis.prediction_log_pb2", "serving")
    requests = []
    for index, record in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator()):
        if index >= MAX_RECORDS:
            raise ValueError(f"{path}: more than {MAX_RECORDS} warmup records")
        log = apis.PredictionLog()
        log.ParseFromString(record)
        if log.WhichOneof("log_type") != "predict_log":
            raise ValueError(f"{path}: record {index} is not a predict request")
        requests.append(log.predict_log.request)
    return requests
