import gc
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.runtime import (
    SIGNATURE_INPUTS,
    SIGNATURES,
    SessionModel,
    SignatureError,
    SignatureNotFound,
)
from keras_transformer.runtime.session_model import (
    PREDICT_METHOD,
    _LoaderDeprecationNotice,
    run_signature,
)
from tests.export.exported import BEAM_SIZE
from tests.processes import run_python


@pytest.fixture(scope="module")
def session_model(export_base):
    model = SessionModel(os.path.join(export_base, "1"))
    yield model
    model.close()


def _text(*sentences):
    return {"text": np.array([s.encode("utf-8") for s in sentences], dtype=object)}


def test_signatures_are_the_servable_ones(session_model):
    assert set(session_model.signatures) == set(SIGNATURES)
    for name in SIGNATURES:
        signature = session_model.signature(name)
        assert signature.method_name == PREDICT_METHOD
        assert set(signature.inputs) == set(SIGNATURE_INPUTS[name])
    assert SIGNATURE_INPUTS["score"] == ("text", "translation")


def test_outputs_have_the_documented_shapes(session_model):
    best = session_model.run("serving_default", _text("The dog sleeps.", "A cat runs."))
    assert best["translation"].shape == (2,) and best["score"].dtype == np.float32
    nbest = session_model.run("translate_nbest", _text("The dog sleeps.", "A cat runs."))
    assert nbest["translations"].shape == (2, BEAM_SIZE) and nbest["scores"].shape == (2, BEAM_SIZE)
    assert list(nbest["translations"][:, 0]) == list(best["translation"])


def test_attention_rows_are_distributions(session_model):
    out = session_model.run("attention", _text("The dog sleeps.", "A cat runs."))
    batch, t, s = out["weights"].shape
    assert out["source_tokens"].shape == (batch, s) and out["target_tokens"].shape == (batch, t)
    real_rows = out["target_tokens"] != b"<pad>"
    assert real_rows.any()
    np.testing.assert_allclose(out["weights"].sum(-1)[real_rows], 1.0, atol=1e-4)


def test_unicode_arrays_are_accepted_as_strings(session_model):
    as_bytes = session_model.run("translate_greedy", _text("Die Katze läuft."))
    as_unicode = session_model.run("translate_greedy", {"text": np.array(["Die Katze läuft."])})
    assert list(as_unicode["translation"]) == list(as_bytes["translation"])


def test_lists_are_taken_as_arrays(session_model):
    as_array = session_model.run("translate_greedy", _text("Die Katze läuft.", "Ein Hund."))
    as_list = session_model.run("translate_greedy", {"text": ["Die Katze läuft.", "Ein Hund."]})
    assert list(as_list["translation"]) == list(as_array["translation"])


@pytest.mark.parametrize(
    "inputs,message",
    [
        ([b"x"], "Inputs must be a dict of input name to array; received list"),
        ({"text": [[b"x"], [b"y", b"z"]]}, "Input 'text' is not an array"),
        ({"text": [1, 2]}, "must be string; received int64"),
        ({"txt": np.array([b"x"], dtype=object)}, r"missing \['text'\], unknown \['txt'\]"),
        ({}, r"missing \['text'\]"),
        ({"text": np.array([1, 2], dtype=np.int32)}, "must be string; received int32"),
        ({"text": np.array([[b"x"]], dtype=object)}, r"rank 1; received shape \[1, 1\]"),
    ],
)
def test_requests_that_do_not_fit_are_refused(session_model, inputs, message):
    with pytest.raises(SignatureError, match=message):
        session_model.run("serving_default", inputs)


def test_unknown_signature_names_the_available_ones(session_model):
    with pytest.raises(SignatureNotFound, match="'nope' not found; available: .*serving_default"):
        session_model.run("nope", _text("x"))


def test_run_signature_loads_runs_and_closes(export_base, session_model):
    sentences = ["The dog sleeps.", ""]
    out = run_signature(os.path.join(export_base, "1"), "serving_default", sentences)
    assert list(out["translation"]) == list(
        session_model.run("serving_default", _text(*sentences))["translation"]
    )
    assert out["translation"][1] == b""


def test_a_one_thread_session_translates_the_same(session_model, export_base):
    # One thread each way, as TF Serving's parallelism flags set it.
    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=1, inter_op_parallelism_threads=1
    )
    one_thread = SessionModel(os.path.join(export_base, "1"), config=config)
    try:
        text = _text("The dog sleeps.", "A cat runs.")
        for name in ("serving_default", "translate_greedy"):
            ours, default = one_thread.run(name, text), session_model.run(name, text)
            assert list(ours["translation"]) == list(default["translation"])
            np.testing.assert_allclose(ours["score"], default["score"], rtol=1e-4, atol=1e-4)
    finally:
        one_thread.close()


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_a_config_that_is_not_a_config_proto_is_refused(export_base):
    with pytest.raises(TypeError, match="ConfigProto"):
        SessionModel(os.path.join(export_base, "1"), config={"intra_op_parallelism_threads": 1})
    gc.collect()  # nothing half-built is left for a finalizer to fail on


def test_missing_directory_is_named(tmp_path):
    with pytest.raises(OSError, match="no_such_version"):
        SessionModel(str(tmp_path / "no_such_version"))


def test_loading_logs_no_deprecation_notice(export_base):
    # TensorFlow notes a deprecated function once a process: a fresh one.
    code = (
        "from keras_transformer.runtime import SessionModel\n"
        f"SessionModel({os.path.join(export_base, '1')!r}).close()\n"
    )
    result = run_python("-c", code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "deprecated" not in result.stderr


@pytest.mark.parametrize(
    "message,args,kept",
    [
        (
            "From %s: %s (from %s) is deprecated.",
            ("x.py:1", "load", "tensorflow.python.saved_model.loader_impl"),
            False,
        ),
        ("From %s: %s (from %s) is deprecated.", ("x.py:1", "f", "other.module"), True),
        ("%(what)s", ({"what": "loader_impl"},), True),
        ("no arguments", None, True),
    ],
)
def test_the_loader_notice_filter_drops_only_that_notice(message, args, kept):
    record = logging.LogRecord("tensorflow", logging.WARNING, "x.py", 1, message, args, None)
    assert _LoaderDeprecationNotice().filter(record) is kept
