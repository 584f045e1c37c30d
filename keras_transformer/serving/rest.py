"""TF Serving's REST API over the served models (`--rest-api-port`).

- `POST /v1/models/M[/versions/N | /labels/L]:predict`, with `instances`
  (row format; answered with `predictions`) or `inputs` (columnar format;
  answered with `outputs`); strings are JSON strings or `{"b64": ...}`;
- `GET /v1/models/M[/versions/N | /labels/L]`: the version status;
- `GET /v1/models/M[/versions/N | /labels/L]/metadata`: the signatures;
- `GET /monitoring/prometheus/metrics`: request counts and latencies.

Errors are `{"error": message}` with 404 (no such model, version or
signature), 400 (anything wrong with the request, its body included),
413 (a body over the limit), 504 (the request's time ran out), 503 (too
many connections) or 500 (a fault of the server's own).

What one client can cost is bounded, as TF Serving's REST front end bounds
it (`--rest_api_num_threads`, `--rest_api_timeout_in_ms`):

- `num_threads` requests are worked on at once (parsed and run); more wait
  their turn, up to their deadline;
- a body is refused before it is parsed if it holds more JSON values than a
  request of the row limit can need, so parsing costs a small multiple of
  the body's size, whatever its shape;
- a connection that has not sent a whole request within the timeout of its
  opening or of its last answer is closed, and a request's work stops when
  its client disconnects or the timeout passes (504);
- open connections are capped; one over the cap is answered 503;
- bodies come with a Content-Length or chunked (`Transfer-Encoding`).
"""

import base64
import json
import logging
import socket
import sys
import threading
import time
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from google.protobuf import json_format
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2

from keras_transformer._validation import shown
from keras_transformer.serving.core import ServingError, WorkSlot

log = logging.getLogger("keras_transformer.serve")
_STATES = get_model_status_pb2.ModelVersionStatus.State


class _BadRequest(Exception):
    pass


class _TooLarge(Exception):
    pass


class _ClientGone(Exception):
    pass


def _to_bytes(value, name):
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate, e.g. "\ud800"
            raise _BadRequest(f"Input {name!r} has a string that is not valid Unicode") from None
    if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
        try:
            return base64.b64decode(value["b64"], validate=True)
        except ValueError:
            raise _BadRequest(f"Input {name!r} has invalid base64") from None
    raise _BadRequest(f'Input {name!r} takes strings (or {{"b64": ...}}); received {shown(value)}')


def _parse_body(raw, max_rows):
    """The JSON of a request body.

    Parsing makes a Python object of every JSON value, and `{},` makes a
    64-byte dict of 3 bytes: before parsing, the values are counted (each
    one past the first follows a `,` or `:` or opens a container; the
    count also takes these characters inside strings, so it only ever
    over-counts) and the body is refused if it holds more than a request
    of the row limit needs plus one value per 8 bytes. Parsing then costs
    at most about ten times the body.
    """
    values = 1 + sum(raw.count(c) for c in (b",", b":", b"[", b"{"))
    allowed = 8 * max_rows + 64 + len(raw) // 8
    if values > allowed:
        raise _BadRequest(
            f"The body has {values} JSON values or separators, more than a request of at "
            f"most {max_rows} rows needs ({allowed})"
        )
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise _BadRequest("The body is not UTF-8") from None
    except RecursionError:
        raise _BadRequest("The body is nested too deeply") from None
    except ValueError as error:  # JSONDecodeError, or a number too long to convert
        why = shown(str(error), most=200, quoted=False)
        raise _BadRequest(f"The body is not JSON: {why}") from None


def _inputs(body):
    """`(signature name, {input: list of bytes}, row format?)` of a body."""
    if not isinstance(body, dict):
        raise _BadRequest("The request body must be a JSON object")
    signature = body.get("signature_name", "")
    if not isinstance(signature, str):
        raise _BadRequest("signature_name must be a string")
    try:
        signature.encode("utf-8")
    except UnicodeEncodeError:
        raise _BadRequest("signature_name is not valid Unicode") from None
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
    """The request handler class of a `RestServer` over `models`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            log.debug("REST %s", fmt % args)

        def _phase(self, phase):
            self.server.mark(self.request, phase)

        def _reply(self, code, body, content_type="application/json"):
            data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
            self._phase("writing")
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            self._phase("reading")

        def send_error(self, code, message=None, explain=None):
            # The standard library's answer is an HTML page: ours is JSON.
            self.close_connection = True
            try:
                phrase = HTTPStatus(code).phrase
            except ValueError:
                phrase = str(code)
            self._reply(code, {"error": message or phrase})

        def _error(self, error):
            code = {"NOT_FOUND": 404, "DEADLINE_EXCEEDED": 504, "UNAVAILABLE": 503}.get(
                getattr(error, "code", ""), 400
            )
            self._reply(code, {"error": str(error)})

        def _fault(self):
            log.exception("REST request %r failed", self.requestline[:200])
            self.close_connection = True
            self._reply(500, {"error": "Internal error of the server; see its log"})

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
            except Exception:
                self._fault()

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

        def _read_body(self):
            """The body, from its Content-Length or its chunks."""
            encoding = self.headers.get("Transfer-Encoding")
            length = self.headers.get("Content-Length")
            if encoding is not None:
                if encoding.strip().lower() != "chunked":
                    raise _BadRequest(f"Transfer-Encoding {shown(encoding, most=40)} is not served")
                if length is not None:
                    raise _BadRequest("A body has a Content-Length or is chunked, not both")
                return self._read_chunks()
            try:
                length = int(length) if length is not None else -1
            except ValueError:
                length = -1
            if length < 0:
                raise _BadRequest("A Content-Length (or a chunked body) is required")
            if length > max_body_bytes:
                raise _TooLarge(f"The body has {length} bytes, over the limit of {max_body_bytes}")
            raw = self.rfile.read(length)
            if len(raw) < length:
                raise _ClientGone()
            return raw

        def _read_chunks(self):
            parts, total = [], 0
            while True:
                line = self.rfile.readline(1024)
                if not line.endswith(b"\n"):
                    raise _ClientGone() if not line else _BadRequest("A chunk size is malformed")
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise _BadRequest("A chunk size is not hexadecimal") from None
                if size < 0:
                    raise _BadRequest("A chunk size is negative")
                if size == 0:
                    break
                total += size
                if total > max_body_bytes:
                    raise _TooLarge(f"The body is over the limit of {max_body_bytes} bytes")
                chunk = self.rfile.read(size)
                if len(chunk) < size:
                    raise _ClientGone()
                parts.append(chunk)
                if self.rfile.read(2) != b"\r\n":
                    raise _BadRequest("A chunk does not end with CRLF")
            for _ in range(100):  # trailer fields, then the empty line
                line = self.rfile.readline(8192)
                if line in (b"\r\n", b"\n"):
                    return b"".join(parts)
                if not line:
                    raise _ClientGone()
            raise _BadRequest("Too many trailer fields")

        def _client_alive(self):
            """False once the client has closed its connection."""
            try:
                data = self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                return True
            except OSError:
                return False
            return bool(data)  # b"": closed; else a pipelined request

        def do_POST(self):
            path = urllib.parse.urlsplit(self.path).path
            try:
                raw = self._read_body()
            except _ClientGone:
                self.close_connection = True
                return
            except _TooLarge as error:
                self.close_connection = True
                return self._reply(413, {"error": str(error)})
            except _BadRequest as error:
                self.close_connection = True
                return self._reply(400, {"error": str(error)})
            self._phase("working")
            deadline = time.monotonic() + self.server.timeout_seconds

            def time_left():
                return deadline - time.monotonic()

            try:
                with WorkSlot(self.server.work, self._client_alive, time_left, "a REST thread"):
                    answer = self._predict(path, raw, time_left)
                del raw
                self._reply(200, answer)
            except _ClientGone:
                self.close_connection = True
            except (ServingError, _BadRequest) as error:
                if error.__class__ is ServingError and error.code == "CANCELLED":
                    self.close_connection = True  # nobody is left to answer
                    return
                self._error(error)
            except Exception:
                self._fault()

        def _predict(self, path, raw, time_left):
            name, version, label, action = _route(path)
            if action != "predict":
                raise ServingError("INVALID_ARGUMENT", "POST is for :predict")
            body = _parse_body(raw, models.limits.max_rows)
            signature, inputs, rows = _inputs(body)
            del body
            _, _, outputs = models.predict(
                name, inputs, signature, version, label, api="rest",
                alive=self._client_alive, time_left=time_left,
            )  # fmt: skip
            return _outputs(outputs, rows)

    return Handler


_TOO_MANY_BODY = json.dumps({"error": "Too many REST connections, retry"}).encode()
_TOO_MANY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(_TOO_MANY_BODY), _TOO_MANY_BODY)
)


class RestServer(ThreadingHTTPServer):
    """An HTTP server whose connections and work are bounded.

    Args:
        address: `(host, port)`.
        handler: the request handler class (`make_handler`).
        num_threads: requests worked on at once.
        timeout_seconds: how long a connection may take to send a whole
            request (from its opening or its last answer), to read an
            answer, and a request to work.
        max_connections: connections open at once; one more is answered
            503 and closed.
    """

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the listen backlog

    def __init__(self, address, handler, num_threads=8, timeout_seconds=30.0,
                 max_connections=None):  # fmt: skip
        super().__init__(address, handler)
        self.work = threading.BoundedSemaphore(num_threads)
        self.timeout_seconds = timeout_seconds
        self.max_connections = max_connections or 16 * num_threads
        self.connections = {}  # socket -> (phase, since)
        self.connections_lock = threading.Lock()
        self._closed = threading.Event()
        threading.Thread(target=self._reap, daemon=True).start()

    def process_request(self, request, client_address):
        with self.connections_lock:
            full = len(self.connections) >= self.max_connections
            if not full:
                self.connections[request] = ("reading", time.monotonic())
        if full:
            try:
                request.settimeout(1.0)
                request.sendall(_TOO_MANY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.connections_lock:
            self.connections.pop(request, None)
        super().shutdown_request(request)

    def mark(self, request, phase):
        """Records that the connection `request` entered `phase` now:
        `reading` (a request), `working`, or `writing` (an answer)."""
        with self.connections_lock:
            if request in self.connections:
                self.connections[request] = (phase, time.monotonic())

    def _reap(self):
        """Closes the connections that read or write for too long; a
        request at work is bounded by its own deadline instead."""
        while not self._closed.wait(min(0.25, self.timeout_seconds / 4)):
            now = time.monotonic()
            with self.connections_lock:
                late = [
                    sock
                    for sock, (phase, since) in self.connections.items()
                    if phase in ("reading", "writing") and now - since > self.timeout_seconds
                ]
                for sock in late:
                    self.connections[sock] = ("closing", now)
            for sock in late:
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked on it
                except OSError:
                    pass

    def handle_error(self, request, client_address):
        error = sys.exc_info()[1]
        if isinstance(error, OSError):  # the client left, or was closed for stalling
            log.debug("REST connection from %s closed: %s", client_address, error)
        else:
            log.exception("REST connection from %s failed", client_address)

    def open_connections(self):
        with self.connections_lock:
            return len(self.connections)

    def server_close(self):
        self._closed.set()
        super().server_close()


def start_rest_server(models, host="127.0.0.1", port=8501, num_threads=8, timeout_seconds=30.0):
    """Serves `models` (a `core.Models`) over REST in a background thread;
    returns `(http_server, bound_port)`.

    Args:
        num_threads: requests worked on at once (`--rest-api-num-threads`).
        timeout_seconds: see `RestServer` (`--rest-api-timeout-in-ms`).

    Raises:
        OSError: the address cannot be bound (e.g. the port is in use).
    """
    # Strings may be JSON-escaped to 6 bytes a byte; the rest is structure.
    max_body = 6 * models.limits.max_request_bytes + (1 << 16)
    try:
        server = RestServer(
            (host, port), make_handler(models, max_body), num_threads, timeout_seconds
        )
    except OSError as error:
        raise OSError(f"Could not bind {host}:{port} for REST: {error.strerror or error}") from None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, server.server_address[1]
