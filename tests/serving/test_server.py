import json
import os
import shutil
import threading

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

from keras_transformer.decoding import Translator
from keras_transformer.export import export_version
from keras_transformer.serving import grpc_intake
from keras_transformer.serving.core import ServingError
from keras_transformer.serving.grpc_client import GrpcTranslationClient
from keras_transformer.serving.server import (
    PredictionServicer,
    parse_version_labels,
    start_server,
)
from tests.processes import REPO, run_python
from tests.serving.conftest import (
    MAX_LENGTH,
    copy_base,
    copy_version,
    wait_for,
    wait_for_status,
)


@pytest.fixture(scope="module")
def served(trained_model, serving_export, tmp_path_factory):
    model, src, tgt = trained_model
    # Versions are added and removed here: on a copy of the shared export.
    base = copy_base(serving_export, tmp_path_factory.mktemp("exports"), warmup=False)
    server, port, manager = start_server(base, "translator", port=0, poll_seconds=0.3)
    translator = Translator(model, src, tgt, beam_size=2, max_output_length=MAX_LENGTH)
    yield {
        "base": base,
        "address": f"127.0.0.1:{port}",
        "translator": translator,
        "manager": manager,
        "model": (model, src, tgt),
    }
    server.stop(0)
    manager.stop()


@pytest.fixture
def client(served):
    with GrpcTranslationClient(served["address"], "translator", timeout=120) as c:
        yield c


def _text(*sentences):
    return {
        "text": np.array(
            [s if isinstance(s, bytes) else s.encode() for s in sentences], dtype=object
        )
    }


def test_translations_match_in_process(served, client):
    sentences = ["The dog sleeps.", "A small cat sees the old man.", ""]
    result = client.translate(sentences)
    expected = served["translator"].translate(tf.constant(sentences))
    assert result["translation"] == [t.decode() for t in expected["translation"].numpy()]
    np.testing.assert_allclose(result["score"], expected["score"].numpy(), atol=1e-4)
    assert result["translation"][2] == "" and result["version"] == 1
    nbest = client.translate(sentences[:1], signature="translate_nbest")
    assert np.array(nbest["translations"]).shape == (1, 2)
    greedy = client.translate(sentences[:1], signature="translate_greedy", version=1)
    assert greedy["translation"] == [
        t.decode()
        for t in served["translator"]
        .translate_greedy(tf.constant(sentences[:1]))["translation"]
        .numpy()
    ]


def test_metadata_and_status(client):
    signatures = client.metadata().signature_def
    assert set(signatures) == {
        "serving_default",
        "translate_nbest",
        "translate_greedy",
        "attention",
        "translate_sample",
        "score",
        "translate_prefix",
        "translate_prefix_nbest",
    }
    assert signatures["serving_default"].method_name == "tensorflow/serving/predict"
    assert set(signatures["serving_default"].outputs) == {"translation", "score"}
    assert client.status() == [(1, "AVAILABLE")]


@pytest.mark.parametrize(
    "inputs,kwargs,code,message",
    [
        (
            {"txt": np.array([b"x"], dtype=object)},
            {},
            grpc.StatusCode.INVALID_ARGUMENT,
            "missing \\['text'\\]",
        ),
        ({}, {}, grpc.StatusCode.INVALID_ARGUMENT, "missing"),
        (
            {"text": np.array([1, 2], dtype=np.int32)},
            {},
            grpc.StatusCode.INVALID_ARGUMENT,
            "must be a string tensor",
        ),
        (
            {"text": np.array([[b"x"]], dtype=object)},
            {},
            grpc.StatusCode.INVALID_ARGUMENT,
            "rank 1",
        ),
        (_text("x"), {"signature": "nope"}, grpc.StatusCode.NOT_FOUND, "nope"),
        (_text("x"), {"version": 42}, grpc.StatusCode.NOT_FOUND, "Version 42"),
    ],
)
def test_bad_requests_get_a_status_and_the_server_keeps_serving(
    client, inputs, kwargs, code, message
):
    with pytest.raises(grpc.RpcError) as error:
        client.predict(inputs, **kwargs)
    assert error.value.code() == code
    assert pytest.importorskip("re").search(message, error.value.details())
    assert client.translate(["The dog sleeps."])["translation"][0]


def test_unknown_model_is_not_found(served):
    with GrpcTranslationClient(served["address"], "no_such_model") as other:
        for call in (lambda: other.translate(["x"]), other.status, other.metadata):
            with pytest.raises(grpc.RpcError) as error:
                call()
            assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_long_and_invalid_utf8_inputs_are_served(served, client):
    # As documented: long inputs are truncated (as the in-process translator
    # does), invalid UTF-8 bytes are replaced by U+FFFD.
    long_input = " ".join(["The old dog sees the red ball."] * 200)
    out, _ = client.predict(_text(long_input, b"\xff\xfe caf\xc3 broken", "fine."))
    assert out["translation"].shape == (3,)
    expected = served["translator"].translate(tf.constant([long_input]))["translation"].numpy()[0]
    assert out["translation"][0] == expected
    replaced, _ = client.predict(_text("\ufffd\ufffd caf\ufffd broken"))
    assert out["translation"][1] == replaced["translation"][0]
    assert [t.decode("utf-8") for t in out["translation"]]  # valid UTF-8 out


def test_concurrent_requests_are_batched_and_correct(served, client):
    sentences = [
        f"The {n} sleeps." for n in ("dog", "cat", "man", "woman", "child", "bird", "girl", "boy")
    ]
    expected = {s: client.translate([s])["translation"][0] for s in sentences}
    results, errors = {}, []

    def worker(sentence):
        try:
            with GrpcTranslationClient(served["address"], "translator", timeout=120) as c:
                for _ in range(3):
                    results.setdefault(sentence, []).append(
                        c.translate([sentence])["translation"][0]
                    )
        except Exception as error:  # collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(s,)) for s in sentences]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for sentence in sentences:
        assert results[sentence] == [expected[sentence]] * 3


def test_new_version_is_swapped_in_and_broken_ones_refused(served, client):
    model, src, tgt = served["model"]
    base = served["base"]
    stop, failures, seen = threading.Event(), [], set()

    def hammer():
        with GrpcTranslationClient(served["address"], "translator", timeout=120) as c:
            while not stop.is_set():
                try:
                    seen.add(c.translate(["The dog sleeps."])["version"])
                except Exception as error:
                    failures.append(error)

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        export_version(
            model, src, tgt, base, version=2, max_output_length=MAX_LENGTH, beam_size=2, check=False
        )
        wait_for_status(client, [(1, "END"), (2, "AVAILABLE")], seconds=120)
        assert client.translate(["The dog sleeps."])["version"] == 2

        broken = os.path.join(base, "3")
        os.makedirs(broken)
        with open(os.path.join(broken, "saved_model.pb"), "wb") as f:
            f.write(b"this is not a SavedModel")
        # TF Serving's view: 1 unloaded, 2 served, 3 refused with its error.
        # A busy host's poll may take its while to try 3: wait for it.
        wait_for_status(client, [(1, "END"), (2, "AVAILABLE"), (3, "END")], seconds=60)
        assert client.translate(["The dog sleeps."])["version"] == 2
        assert 3 in served["manager"].failed
        # The hammer's call in flight at the swap ends on version 1, and on a
        # loaded host it can outlast the checks above (seconds, beside the
        # load of version 2): its next calls must reach version 2.
        wait_for(lambda: 2 in seen or failures, seconds=60, interval=0.1)
    finally:
        stop.set()
        thread.join()
        shutil.rmtree(os.path.join(base, "3"), ignore_errors=True)
    assert not failures
    assert 2 in seen


def test_sessions_run_with_the_thread_pools_asked_for(served, client):
    server, port, manager = start_server(
        served["base"], "translator", port=0, poll_seconds=0, intra_op_threads=1,
        inter_op_threads=1,
    )  # fmt: skip
    try:
        version = manager.get()
        config = version.model.config
        version.release()
        assert (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads) == (1, 1)
        sentences = ["The dog sleeps.", "A small cat sees the old man."]
        with GrpcTranslationClient(f"127.0.0.1:{port}", "translator", timeout=120) as one_thread:
            assert (
                one_thread.translate(sentences)["translation"]
                == client.translate(sentences)["translation"]
            )
    finally:
        server.stop(0)
        manager.stop()


@pytest.fixture(scope="module")
def labelled(served, tmp_path_factory):
    """Versions 1 and 2 (copies of one export) served together, with
    labels, for the tests that only ask it."""
    base = tmp_path_factory.mktemp("labelled") / "translator"
    for version in (1, 2):
        copy_version(os.path.join(served["base"], "1"), base / str(version))
    labels = {"stable": 1, "canary": 2, "retired": 7}
    server, port, manager = start_server(
        str(base), "translator", port=0, poll_seconds=0, version_policy="all", version_labels=labels
    )
    with GrpcTranslationClient(f"127.0.0.1:{port}", "translator", timeout=120) as c:
        yield c
    server.stop(0)
    manager.stop()


def test_version_labels_route_requests(labelled):
    assert labelled.translate(["The dog sleeps."], version_label="stable")["version"] == 1
    assert labelled.translate(["The dog sleeps."], version_label="canary")["version"] == 2
    assert labelled.translate(["The dog sleeps."])["version"] == 2
    assert labelled.status() == [(1, "AVAILABLE"), (2, "AVAILABLE")]
    assert labelled.status(version_label="stable") == [(1, "AVAILABLE")]
    assert "serving_default" in labelled.metadata(version_label="canary").signature_def


@pytest.mark.parametrize(
    "label,code,message",
    [
        ("nope", grpc.StatusCode.INVALID_ARGUMENT, "Unrecognized servable version label: nope"),
        ("", grpc.StatusCode.INVALID_ARGUMENT, "Unrecognized servable version label"),
        ("retired", grpc.StatusCode.NOT_FOUND, "Version 7"),
    ],
)
def test_bad_version_labels_get_a_status(labelled, label, code, message):
    for call in (
        lambda: labelled.translate(["x"], version_label=label),
        lambda: labelled.status(version_label=label),
    ):
        with pytest.raises(grpc.RpcError) as error:
            call()
        assert error.value.code() == code
        assert message in error.value.details()
    assert labelled.translate(["The dog sleeps."], version_label="stable")["version"] == 1


def test_client_refuses_a_version_and_a_label(client):
    with pytest.raises(ValueError, match="not both"):
        client.translate(["x"], version=1, version_label="stable")


def test_parse_version_labels():
    assert parse_version_labels(["stable=1", "canary=12"]) == {"stable": 1, "canary": 12}
    assert parse_version_labels(None) == {}


@pytest.mark.parametrize(
    "pairs,match",
    [
        (["stable"], "LABEL=VERSION"),
        (["stable=one"], "LABEL=VERSION"),
        (["stable=-1"], "LABEL=VERSION"),
        (["=1"], "non-empty"),
        (["a=1", "a=2"], "twice"),
    ],
)
def test_parse_version_labels_errors(pairs, match):
    with pytest.raises(ValueError, match=match):
        parse_version_labels(pairs)


def test_score_over_grpc_equals_the_translator(served, client):
    sentences = ["The dog sleeps.", "A small cat sees the old man.", ""]
    translations = ["Der Hund schläft.", "Eine kleine Katze.", ""]
    result = client.score(sentences, translations)
    expected = served["translator"].score(tf.constant(sentences), tf.constant(translations))
    np.testing.assert_allclose(result["log_prob"], expected["log_prob"].numpy(), atol=1e-4)
    assert result["length"] == expected["length"].numpy().tolist()


def test_samples_over_grpc_are_translations_with_their_scores(client):
    result = client.translate(["The dog sleeps."] * 6, signature="translate_sample")
    assert len(result["translation"]) == 6 and all(
        isinstance(t, str) for t in result["translation"]
    )
    assert np.all(np.array(result["score"]) <= 0)


@pytest.mark.parametrize(
    "inputs, message",
    [
        ({**_text("a", "b"), "translation": np.array([b"x"], dtype=object)}, "same number of rows"),
        (_text("a"), r"missing \['translation'\]"),
    ],
)
def test_bad_score_requests_are_refused_and_the_server_keeps_serving(client, inputs, message):
    with pytest.raises(grpc.RpcError) as error:
        client.predict(inputs, signature="score")
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert pytest.importorskip("re").search(message, error.value.details())
    with pytest.raises(ValueError, match="One translation a sentence"):
        client.score(["a", "b"], ["x"])
    assert len(client.score(["a"], ["x"])["length"]) == 1


_FROZEN = """
import gc, json, os, signal, threading, types
from keras_transformer.serving import server
from keras_transformer.serving.options import ServerOptions

before = gc.get_freeze_count()
fake = types.SimpleNamespace(grpc_port=1, rest_port=None, stop=lambda drain: None)
server._entries = lambda options: [types.SimpleNamespace(name="translator")]
server.start = lambda options, entries: fake
seen = {}

def after_ready():
    seen["frozen"] = gc.get_freeze_count()
    os.kill(os.getpid(), signal.SIGTERM)

real_print = print
def watch(*args, **kwargs):
    real_print(*args, **kwargs)
    if args and str(args[0]).startswith("READY"):
        threading.Timer(0.1, after_ready).start()
server.print = watch
server.serve_forever(ServerOptions(model_base_path="unused", drain_seconds=0))
real_print(json.dumps({"before": before, "frozen": seen["frozen"]}))
"""


def test_serve_forever_keeps_what_loading_made_out_of_the_garbage_collector():
    """Once started, the server's objects (TensorFlow's, Keras', the
    models') are frozen: a full collection no longer scans them."""
    answer = run_python("-c", _FROZEN, cwd=REPO, timeout=120)
    assert answer.returncode == 0, answer.stderr[-2000:]
    counts = json.loads(answer.stdout.strip().splitlines()[-1])
    assert counts["before"] == 0 and counts["frozen"] > 10_000, counts


class _Recorded(Exception):
    pass


class _Context:
    """What `Predict` asks of a gRPC call's context."""

    def time_remaining(self):
        return None

    def is_active(self):
        return True

    def abort(self, code, details):
        raise _Recorded(code)


@pytest.mark.parametrize("held", [False, True])
def test_a_held_calls_predict_yields_to_the_others(held):
    """The intake runs a held call's handler under `_run_held`; its request
    then yields in the batcher (`Batcher.submit`'s `yielding`)."""
    seen = []

    class _Models:
        def predict(self, *args, yielding, **kwargs):
            seen.append(yielding)
            raise ServingError("NOT_FOUND", "recorded")

    servicer = PredictionServicer(_Models(), threading.BoundedSemaphore(1))
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "translator"
    call = grpc_intake._run_held if held else lambda fn, args, kwargs: fn(*args, **kwargs)
    with pytest.raises(_Recorded, match="NOT_FOUND"):
        call(servicer.Predict, (request, _Context()), {})
    assert seen == [held]
    assert not grpc_intake.running_held_call()  # the thread is itself again
