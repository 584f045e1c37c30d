"""The REST client against a loopback stand-in for TF Serving's REST API."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from keras_transformer.serving.rest_client import RestTranslationClient


class _Handler(BaseHTTPRequestHandler):
    requests = []

    def log_message(self, *args):
        pass

    def _reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append((self.path, body))
        if body.get("signature_name") == "nope":
            return self._reply(400, {"error": 'Serving signature name: "nope" not found'})
        texts = body["inputs"]["text"]
        self._reply(
            200,
            {"outputs": {"translation": [t.upper() for t in texts], "score": [-1.0] * len(texts)}},
        )

    def do_GET(self):
        self.requests.append((self.path, None))
        self._reply(200, {"model_version_status": [{"version": "1", "state": "AVAILABLE"}]})


@pytest.fixture
def rest_server():
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Handler.requests.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_predict_uses_tf_serving_rest_format(rest_server):
    client = RestTranslationClient(rest_server, "translator")
    out = client.translate(["Guten Tag", "Grüß Gott"], version=3)
    assert out["translation"] == ["GUTEN TAG", "GRÜSS GOTT"]
    path, body = _Handler.requests[-1]
    assert path == "/v1/models/translator/versions/3:predict"
    assert body == {
        "signature_name": "serving_default",
        "inputs": {"text": ["Guten Tag", "Grüß Gott"]},
    }
    assert client.status()["model_version_status"][0]["state"] == "AVAILABLE"
    assert _Handler.requests[-1][0] == "/v1/models/translator"


def test_errors_carry_the_server_message(rest_server):
    client = RestTranslationClient(rest_server, "translator")
    with pytest.raises(RuntimeError, match="400.*nope"):
        client.translate(["x"], signature="nope")


def test_version_labels_use_the_labels_path(rest_server):
    client = RestTranslationClient(rest_server, "translator")
    client.translate(["x"], version_label="canary")
    assert _Handler.requests[-1][0] == "/v1/models/translator/labels/canary:predict"
    client.metadata(version_label="stable")
    assert _Handler.requests[-1][0] == "/v1/models/translator/labels/stable/metadata"
    with pytest.raises(ValueError, match="not both"):
        client.status(version=1, version_label="stable")


@pytest.mark.parametrize(
    "model,label,path",
    [
        ("../../admin", None, "/v1/models/..%2F..%2Fadmin:predict"),
        ("x:predict?x=1#", None, "/v1/models/x%3Apredict%3Fx%3D1%23:predict"),
        ("translator", "a/b?c", "/v1/models/translator/labels/a%2Fb%3Fc:predict"),
        ("über modell", None, "/v1/models/%C3%BCber%20modell:predict"),
    ],
)
def test_every_path_segment_is_escaped(rest_server, model, label, path):
    client = RestTranslationClient(rest_server, model)
    client.translate(["x"], version_label=label)
    assert _Handler.requests[-1][0] == path


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://host/", "localhost:8501", "http://", "http://h:1/?q=1"],
)
def test_only_http_base_urls_are_accepted(url):
    with pytest.raises(ValueError, match="REST base URL"):
        RestTranslationClient(url, "translator")


@pytest.mark.parametrize("timeout", [0, -1, True, "30"])
def test_a_timeout_is_a_positive_number(timeout):
    with pytest.raises(ValueError, match="`timeout` must be a positive number"):
        RestTranslationClient("http://127.0.0.1:8501", "translator", timeout=timeout)


@pytest.mark.parametrize("version", ["1/../2", -1, True, 1.5])
def test_versions_are_numbers(rest_server, version):
    with pytest.raises(ValueError, match="version"):
        RestTranslationClient(rest_server, "translator").status(version=version)
