"""The warmup records TF Serving replays when it loads a version."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.export.warmup import write_warmup_requests
from keras_transformer.runtime import SIGNATURE_INPUTS, SIGNATURES, SessionModel
from keras_transformer.runtime.warmup_records import MAX_RECORDS, WARMUP_PATH, read_warmup_requests


def test_the_export_has_warmup_records_for_every_signature(export_base):
    version = os.path.join(export_base, "1")
    assert os.path.exists(os.path.join(version, WARMUP_PATH))
    requests = read_warmup_requests(version)
    assert 0 < len(requests) <= MAX_RECORDS
    signatures = {r.model_spec.signature_name for r in requests}
    assert signatures == set(SIGNATURES)
    sizes = sorted({r.inputs["text"].tensor_shape.dim[0].size for r in requests})
    assert sizes == [1, 8]
    # Each request runs as it is in the served graph.
    model = SessionModel(version)
    try:
        for request in requests:
            inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
            name = request.model_spec.signature_name
            assert sorted(inputs) == sorted(SIGNATURE_INPUTS[name])
            outputs = model.run(name, inputs)
            assert len(next(iter(outputs.values()))) == len(inputs["text"])
    finally:
        model.close()


def test_records_round_trip(tmp_path):
    path = write_warmup_requests(
        str(tmp_path), ["a", "b"], sentences=["x", "y z"], batch_sizes=(3,)
    )
    assert path == os.path.join(str(tmp_path), WARMUP_PATH)
    requests = read_warmup_requests(str(tmp_path))
    assert [r.model_spec.signature_name for r in requests] == ["a", "b"]
    assert tf.make_ndarray(requests[0].inputs["text"]).tolist() == [b"x", b"y z", b"x"]


def test_a_foreign_record_is_refused(tmp_path):
    path = tmp_path / WARMUP_PATH
    path.parent.mkdir()
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(b"\x00not a prediction log")
    with pytest.raises(Exception):  # noqa: B017 (a parse error or ValueError: either refuses)
        read_warmup_requests(str(tmp_path))


def test_no_file_means_no_warmup(tmp_path):
    assert read_warmup_requests(str(tmp_path)) == []


def test_too_many_requests_are_refused(tmp_path):
    with pytest.raises(ValueError, match="At most 1000"):
        write_warmup_requests(str(tmp_path), ["s"] * 501, batch_sizes=(1, 2))
    assert not np.any([os.path.exists(tmp_path / WARMUP_PATH)])
