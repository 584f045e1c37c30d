"""TF Serving's REST API over the served models (`--rest-api-port`).

- `POST /v1/models/M[/versions/N | /labels/L]:predict`, with `instances`
  (row format; answered with `predictions`) or `inputs` (columnar format;
  answered with `outputs`); strings are JSON strings or `{"b64": ...}`;
- `GET /v1/models/M[/versions/N | /labels/L]`: the version status;
- `GET /v1/models/M[/versions/N | /labels/L]/metadata`: the signatures;
- `GET /monitoring/prometheus/metrics`: request counts and latencies.

Errors are `{"error": message}` with 404 (no such model, version or
signature) or 400 (anything wrong with the request).
"""

import base64
import json
import logging
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from google.protobuf import json_format
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2

from keras_transformer.serving.core import ServingError

log = logging.getLogger("keras_transformer.serve")
_STATES = get_model_status_pb2.ModelVersionStatus.State


class _BadRequest(Exception):
    pass


def _to_bytes(value, name):
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
        try:
            return base64.b64decode(value["b64"], validate=True)
        except ValueError:
            raise _BadRequest(f"Input {name!r} has invalid base64") from None
    raise _BadRequest(f'Input {name!r} takes strings (or {{"b64": ...}}); received {value!r:.80}')


def _inputs(body):
    """`(signature name, {input: list of bytes}, row format?)` of a body."""
    if not isinstance(body, dict):
        raise _BadRequest("The request body must be a JSON object")
    signature = body.get("signature_name", "")
    if not isinstance(signature, str):
        raise _BadRequest("signature_name must be a string")
    if ("instances" in body) == ("inputs" in body):
        raise _BadRequest('The request needs exactly one of "instances" or "inputs"')
    if "instances" in body:
        rows = body["instances"]
        if not isinstance(rows, list):
            raise _BadRequest('"instances" must be a list')
        if rows and all(isinstance(r, dict) and "b64" not in r for r in rows):
            names = set(rows[0])
            if any(set(r) != names for r in rows):
                raise _BadRequest("Every instance must name the same inputs")
            return signature, {n: [_to_bytes(r[n], n) for r in rows] for n in names}, True
        return signature, {"text": [_to_bytes(r, "text") for r in rows]}, True
    columns = body["inputs"]
    if isinstance(columns, dict) and not set(columns) == {"b64"}:
        return signature, {n: _column(v, n) for n, v in columns.items()}, False
    return signature, {"text": _column(columns, "text")}, False


def _column(values, name):
    if not isinstance(values, list):
        raise _BadRequest(f"Input {name!r} must be a list of strings")
    return [_to_bytes(v, name) for v in values]


def _json_value(array):
    def convert(value):
        if isinstance(value, bytes):
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                return {"b64": base64.b64encode(value).decode("ascii")}
        return value

    if array.dtype == object:
        return np.vectorize(convert, otypes=[object])(array).tolist() if array.size else []
    return array.tolist()


def _outputs(outputs, rows):
    if rows:
        names = sorted(outputs)
        columns = {n: _json_value(outputs[n]) for n in names}
        count = len(next(iter(columns.values()))) if columns else 0
        if len(names) == 1:
            return {"predictions": columns[names[0]]}
        return {"predictions": [{n: columns[n][i] for n in names} for i in range(count)]}
    if len(outputs) == 1:
        return {"outputs": _json_value(next(iter(outputs.values())))}
    return {"outputs": {n: _json_value(v) for n, v in sorted(outputs.items())}}


def _route(path):
    """`(model, version, label, action)` of a `/v1/models/...` path."""
    verb = ""
    if ":" in path.rsplit("/", 1)[-1]:
        path, verb = path.rsplit(":", 1)
    segments = [urllib.parse.unquote(s) for s in path.split("/")]
    if len(segments) < 4 or segments[:3] != ["", "v1", "models"] or not segments[3]:
        raise ServingError("NOT_FOUND", f"Malformed request: {path}")
    name, rest = segments[3], segments[4:]
    version = label = None
    if len(rest) >= 2 and rest[0] in ("versions", "labels"):
        if rest[0] == "versions":
            if not rest[1].isascii() or not rest[1].isdigit():
                raise ServingError("INVALID_ARGUMENT", f"Malformed version: {rest[1]!r}")
            version = int(rest[1])
        else:
            label = rest[1]
        rest = rest[2:]
    if rest == ["metadata"] and not verb:
        return name, version, label, "metadata"
    if rest:
        raise ServingError("NOT_FOUND", f"Malformed request: {path}")
    if verb in ("", "predict"):
        return name, version, label, verb or "status"
    raise ServingError("INVALID_ARGUMENT", f"The {verb!r} API is not served; use :predict")


def make_handler(models, max_body_bytes):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            log.debug("REST %s", fmt % args)

        def _reply(self, code, body, content_type="application/json"):
            data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, error):
            code = {"NOT_FOUND": 404, "DEADLINE_EXCEEDED": 504}.get(getattr(error, "code", ""), 400)
            self._reply(code, {"error": str(error)})

        def do_GET(self):
            path = urllib.parse.urlsplit(self.path).path
            try:
                if path == "/monitoring/prometheus/metrics":
                    return self._reply(200, models.metrics.render().encode(), "text/plain")
                name, version, label, action = _route(path)
                if action == "status":
                    return self._reply(200, self._status(name, version, label))
                if action == "metadata":
                    return self._reply(200, self._metadata(name, version, label))
                raise ServingError("INVALID_ARGUMENT", "Predict is a POST")
            except (ServingError, _BadRequest) as error:
                self._error(error)

        def _status(self, name, version, label):
            statuses = []
            for number, state, error in models.status(name, version, label):
                statuses.append({
                    "version": str(number),
                    "state": _STATES.Name(state),
                    "status": {"error_code": "UNKNOWN" if error else "OK", "error_message": error},
                })  # fmt: skip
            return {"model_version_status": statuses}

        def _metadata(self, name, version, label):
            number, signatures = models.metadata(name, version, label)
            signature_map = get_model_metadata_pb2.SignatureDefMap()
            for key, value in signatures.items():
                signature_map.signature_def[key].CopyFrom(value)
            return {
                "model_spec": {"name": name, "signature_name": "", "version": str(number)},
                "metadata": {"signature_def": json_format.MessageToDict(signature_map)},
            }

        def do_POST(self):
            path = urllib.parse.urlsplit(self.path).path
            try:
                length = int(self.headers.get("Content-Length") or -1)
            except ValueError:
                length = -1
            if length < 0 or length > max_body_bytes:
                self.close_connection = True
                return self._reply(
                    400 if length < 0 else 413,
                    {"error": "A Content-Length is required" if length < 0 else
                     f"The body has {length} bytes, over the limit of {max_body_bytes}"},
                )  # fmt: skip
            raw = self.rfile.read(length)
            try:
                name, version, label, action = _route(path)
                if action != "predict":
                    raise ServingError("INVALID_ARGUMENT", "POST is for :predict")
                try:
                    body = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as error:
                    raise _BadRequest(f"The body is not JSON: {error}") from None
                signature, inputs, rows = _inputs(body)
                _, _, outputs = models.predict(name, inputs, signature, version, label, api="rest")
                self._reply(200, _outputs(outputs, rows))
            except (ServingError, _BadRequest) as error:
                self._error(error)

    return Handler


def start_rest_server(models, host="127.0.0.1", port=8501):
    """Serves `models` (a `core.Models`) over REST in a background thread;
    returns `(http_server, bound_port)`.

    Raises:
        OSError: the address cannot be bound (e.g. the port is in use).
    """
    # Strings may be JSON-escaped to 6 bytes a byte; the rest is structure.
    max_body = 6 * models.limits.max_request_bytes + (1 << 16)
    try:
        server = ThreadingHTTPServer((host, port), make_handler(models, max_body))
    except OSError as error:
        raise OSError(f"Could not bind {host}:{port} for REST: {error.strerror or error}") from None
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, server.server_address[1]
