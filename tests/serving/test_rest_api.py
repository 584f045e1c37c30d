"""TF Serving's REST API on the local server, and model config files."""

import base64
import json
import os
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from keras_transformer.serving.grpc_client import GrpcTranslationClient
from keras_transformer.serving.model_config import read_model_config
from keras_transformer.serving.options import ServerOptions
from keras_transformer.serving.rest_client import RestTranslationClient
from keras_transformer.serving.server import start
from tests.serving.conftest import copy_version, wait_for

SENTENCES = ["The dog sleeps.", "A small cat sees the old man."]

CONFIG = """
model_config_list {
  config { name: "translator" base_path: "translator" model_platform: "tensorflow"
           model_version_policy { latest { num_versions: 2 } }
           version_labels { key: "stable" value: 1 } }
  config { name: "other" base_path: "other" model_version_policy { specific { versions: 1 } } }
}
"""


@pytest.fixture(scope="module")
def root(serving_export, tmp_path_factory):
    # Copies of the shared export: the config, not the weights, is under test.
    root = tmp_path_factory.mktemp("models")
    for folder in ("translator/1", "translator/2", "other/1"):
        copy_version(os.path.join(serving_export, "1"), root / folder)
    (root / "models.config").write_text(CONFIG)
    return root


@pytest.fixture(scope="module")
def serving(root):
    config = str(root / "models.config")
    options = ServerOptions(
        model_config_file=config,
        model_config_file_poll_wait_seconds=0.2,
        port=0,
        rest_api_port=0,
        poll_seconds=0,
        max_request_rows=50,
    )
    serving = start(options)
    yield serving
    serving.stop()


def _url(serving, path):
    return f"http://127.0.0.1:{serving.rest_port}{path}"


def _call(serving, path, body=None, raw=None):
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(_url(serving, path), data=data)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_config_serves_both_models_with_their_policies(serving):
    assert sorted(serving.models.managers) == ["other", "translator"]
    assert sorted(serving.models.manager("translator").versions) == [1, 2]
    assert sorted(serving.models.manager("other").versions) == [1]


def test_row_and_columnar_formats_match_grpc(serving):
    with GrpcTranslationClient(f"127.0.0.1:{serving.grpc_port}", "translator") as client:
        expected = client.translate(SENTENCES, version=2)
    code, rows = _call(serving, "/v1/models/translator:predict", {"instances": SENTENCES})
    assert code == 200
    assert [p["translation"] for p in rows["predictions"]] == expected["translation"]
    assert [p["score"] for p in rows["predictions"]] == pytest.approx(expected["score"])
    code, columns = _call(
        serving,
        "/v1/models/translator/versions/2:predict",
        {"signature_name": "serving_default", "inputs": {"text": SENTENCES}},
    )
    assert code == 200 and columns["outputs"]["translation"] == expected["translation"]
    encoded = [{"b64": base64.b64encode(s.encode()).decode()} for s in SENTENCES]
    code, b64 = _call(serving, "/v1/models/translator:predict", {"inputs": encoded})
    assert code == 200 and b64["outputs"]["translation"] == expected["translation"]
    code, named = _call(
        serving, "/v1/models/translator:predict", {"instances": [{"text": s} for s in SENTENCES]}
    )
    assert code == 200 and named == rows
    # A target prefix over REST: each translation continues its own; an
    # empty one is the plain translation.
    prefixes = [expected["translation"][0].split(" ")[0]] + [""] * (len(SENTENCES) - 1)
    code, prefixed = _call(serving, "/v1/models/translator/versions/2:predict", {
        "signature_name": "translate_prefix",
        "inputs": {"text": SENTENCES, "target_prefix": prefixes},
    })  # fmt: skip
    assert code == 200
    translations = prefixed["outputs"]["translation"]
    assert translations[0].startswith(prefixes[0])
    assert translations[1:] == expected["translation"][1:]


def test_status_metadata_and_labels(serving):
    code, status = _call(serving, "/v1/models/translator")
    assert code == 200
    assert [(s["version"], s["state"]) for s in status["model_version_status"]] == [
        ("1", "AVAILABLE"),
        ("2", "AVAILABLE"),
    ]
    assert status["model_version_status"][0]["status"] == {"error_code": "OK", "error_message": ""}
    code, metadata = _call(serving, "/v1/models/translator/labels/stable/metadata")
    assert code == 200 and metadata["model_spec"]["version"] == "1"
    signatures = metadata["metadata"]["signature_def"]["signatureDef"]
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


@pytest.mark.parametrize(
    "path,body,code,message",
    [
        ("/v1/models/nope:predict", {"instances": ["x"]}, 404, "nope"),
        ("/v1/models/translator/versions/9:predict", {"instances": ["x"]}, 404, "Version 9"),
        ("/v1/models/translator/labels/beta:predict", {"instances": ["x"]}, 400, "beta"),
        (
            "/v1/models/translator:predict",
            {"signature_name": "nope", "instances": ["x"]},
            404,
            "nope",
        ),
        (
            "/v1/models/translator:predict",
            {"instances": ["x"], "inputs": ["x"]},
            400,
            "exactly one",
        ),
        ("/v1/models/translator:predict", {"instances": [1, 2]}, 400, "takes strings"),
        ("/v1/models/translator:predict", {"instances": ["x"] * 51}, 400, "--max-request-rows"),
        ("/v1/models/translator:classify", {"instances": ["x"]}, 400, "classify"),
        ("/v1/models/translator/versions/x1:predict", {"instances": ["x"]}, 400, "x1"),
        ("/v2/models/translator:predict", {"instances": ["x"]}, 404, "Malformed"),
    ],
)
def test_errors_are_json_with_their_status(serving, path, body, code, message):
    got, reply = _call(serving, path, body)
    assert got == code and message in reply["error"]


def test_a_body_that_is_not_json_or_too_large(serving):
    code, reply = _call(serving, "/v1/models/translator:predict", raw=b"{not json")
    assert code == 400 and "not JSON" in reply["error"]
    request = urllib.request.Request(
        _url(serving, "/v1/models/translator:predict"),
        data=b"{}",
        headers={"Content-Length": str(1 << 40)},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=60)
    assert caught.value.code == 413
    # The server still serves.
    assert _call(serving, "/v1/models/translator")[0] == 200


def test_the_rest_client_against_the_server(serving):
    client = RestTranslationClient(f"http://127.0.0.1:{serving.rest_port}", "translator")
    out = client.translate(SENTENCES, version_label="stable")
    targets = ["Der Hund schläft."] * len(SENTENCES)
    scored = client.score(SENTENCES, targets, version=1)
    with GrpcTranslationClient(f"127.0.0.1:{serving.grpc_port}", "translator") as grpc_client:
        assert out["translation"] == grpc_client.translate(SENTENCES, version=1)["translation"]
        expected = grpc_client.score(SENTENCES, targets, version=1)
    np.testing.assert_allclose(scored["log_prob"], expected["log_prob"], atol=1e-5)
    assert scored["length"] == expected["length"]
    assert client.status(version=2)["model_version_status"][0]["state"] == "AVAILABLE"
    assert "metadata" in client.metadata()
    with pytest.raises(RuntimeError, match="404"):
        RestTranslationClient(f"http://127.0.0.1:{serving.rest_port}", "../../admin").status()


def test_prometheus_metrics(serving):
    _call(serving, "/v1/models/translator:predict", {"instances": ["x"]})
    _call(serving, "/v1/models/nope:predict", {"instances": ["x"]})
    serving.grpc_server.pool.on_expired()  # as a gRPC call expired before it was taken
    with urllib.request.urlopen(_url(serving, "/monitoring/prometheus/metrics")) as response:
        text = response.read().decode()
    assert ':tensorflow:serving:request_count{model_name="translator",version="2",' in text
    # Its request was never read: its model is not known.
    assert ('model_name="<unknown>",version="",signature="",api="grpc",'
            'status="DEADLINE_EXCEEDED"}') in text  # fmt: skip
    assert 'api="rest",status="OK"}' in text
    # A name the server does not serve is counted under one fixed label.
    assert 'model_name="nope"' not in text
    assert 'model_name="<unknown>",version="",signature="",api="rest",status="NOT_FOUND"' in text
    assert ":tensorflow:serving:request_latency_bucket{" in text and 'le="+Inf"' in text


def test_an_empty_request_is_answered_and_changes_nothing(serving):
    empty_columns = {"outputs": {"score": [], "translation": []}}
    cases = [
        ({"instances": []}, {"predictions": []}),
        ({"inputs": []}, empty_columns),
        ({"inputs": {"text": []}}, empty_columns),
    ]
    for body, expected in cases:
        for _ in range(5):
            assert _call(serving, "/v1/models/translator:predict", body) == (200, expected)
    status, answer = _call(serving, "/v1/models/translator:predict", {"instances": SENTENCES})
    assert status == 200 and len(answer["predictions"]) == 2


BROKEN_CONFIG = """
model_config_list {
  config { name: "translator" base_path: "translator"
           model_version_policy { latest { num_versions: 2 } }
           version_labels { key: "stable" value: 2 } }
  config { name: "other" base_path: "translator" model_version_policy { specific { versions: 1 } } }
  config { name: "ghost" base_path: "no-such-folder" }
}
"""


def test_a_config_with_a_missing_base_path_is_not_applied_at_all(serving, root, caplog):
    config = root / "models.config"
    original = config.read_text()
    managers = dict(serving.models.managers)
    threads = threading.active_count()
    try:
        for attempt in range(3):
            caplog.clear()
            config.write_text(BROKEN_CONFIG)
            os.utime(config, ns=(time.time_ns(), time.time_ns() + (attempt + 1) * 10**9))
            wait_for(lambda: "no-such-folder" in caplog.text, seconds=30)
            assert "Ignoring the changed model config" in caplog.text
        assert serving.models.managers == managers  # the very same managers
        assert serving.models.manager("translator").version_for_label("stable") == 1
        assert threading.active_count() <= threads
    finally:
        config.write_text(original)
        os.utime(config, ns=(time.time_ns(), time.time_ns() + 5 * 10**9))


def test_a_model_that_fails_to_start_undoes_the_others(serving, root, monkeypatch):
    from keras_transformer.serving.model_config import ModelEntry

    started, real = [], serving._make_manager

    def make(entry):
        if entry.name == "bad":
            raise RuntimeError("cannot start")
        manager = real(entry)
        started.append(manager)
        return manager

    monkeypatch.setattr(serving, "_make_manager", make)
    managers = dict(serving.models.managers)
    other = str(root / "other")
    entries = [ModelEntry("new", other, version_labels=(("x", 1),)), ModelEntry("bad", other)]
    with pytest.raises(RuntimeError, match="cannot start"):
        serving.apply(entries)
    assert serving.models.managers == managers
    assert len(started) == 1 and started[0].versions == {}  # stopped, its version unloaded


def test_invented_names_do_not_grow_the_metrics(serving):
    def scrape():
        with urllib.request.urlopen(_url(serving, "/monitoring/prometheus/metrics")) as response:
            return response.read()

    for i in range(3):  # every label value that can appear, once
        _call(serving, f"/v1/models/bogus{i}:predict", {"instances": ["x"]})
        _call(serving, f"/v1/models/translator/versions/9{i}:predict", {"instances": ["x"]})
        _call(serving, "/v1/models/translator:predict", {"signature_name": f"s{i}",
                                                         "instances": ["x"]})  # fmt: skip
    before = len(scrape().splitlines())
    for i in range(300):
        _call(serving, f"/v1/models/bogus-{i}:predict", {"instances": ["x"]})
        _call(serving, f"/v1/models/translator/versions/{1000 + i}:predict", {"instances": ["x"]})
        _call(serving, "/v1/models/translator:predict", {"signature_name": f"sig-{i}",
                                                         "instances": ["x"]})  # fmt: skip
    text = scrape()
    assert len(text.splitlines()) == before  # the counts grew, not the series
    assert b"bogus-" not in text and b"sig-" not in text and b'version="1000"' not in text


def test_a_changed_config_is_applied_and_a_broken_one_ignored(serving, root):
    config = root / "models.config"
    original = config.read_text()
    translator = serving.models.manager("translator")
    try:
        config.write_text(
            original.replace('key: "stable" value: 1', 'key: "stable" value: 2').replace(
                'config { name: "other"', 'config { name: "third"'
            )
        )
        os.utime(config, ns=(time.time_ns(), time.time_ns() + 10**9))
        wait_for(lambda: "third" in serving.models.managers, seconds=60, interval=0.1)
        assert sorted(serving.models.managers) == ["third", "translator"]
        # Same versions: the manager (and its loaded models) is kept.
        assert serving.models.manager("translator") is translator
        assert translator.version_for_label("stable") == 2
        config.write_text("model_config_list { this is not a config }")
        os.utime(config, ns=(time.time_ns(), time.time_ns() + 2 * 10**9))
        time.sleep(1.0)
        assert sorted(serving.models.managers) == ["third", "translator"]
    finally:
        config.write_text(original)
        os.utime(config, ns=(time.time_ns(), time.time_ns() + 3 * 10**9))
        wait_for(lambda: "other" in serving.models.managers, seconds=60, interval=0.1)


@pytest.mark.parametrize(
    "text,match",
    [
        ("model_config_list { config { name: 'a' } }", "base_path"),
        (
            "model_config_list { config { name: 'a' base_path: '/x' } "
            "config { name: 'a' base_path: '/y' } }",
            "twice",
        ),
        (
            "model_config_list { config { name: 'a' base_path: '/x' model_platform: 'onnx' } }",
            "platform",
        ),
        ("custom_model_config { }", "model_config_list"),
        ("this is not text format", "not a text ModelServerConfig"),
    ],
)
def test_bad_config_files_are_named(tmp_path, text, match):
    path = tmp_path / "models.config"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as caught:
        read_model_config(str(path))
    assert str(path) in str(caught.value)
