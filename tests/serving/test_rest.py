"""The REST front end's bounds, over a scripted stand-in for the models:
malformed bodies, chunked bodies, stalled and abandoned clients, and the
caps on work and connections."""

import http.client
import json
import socket
import threading
import time
import tracemalloc

import numpy as np
import pytest

from keras_transformer.serving.core import ServingError
from keras_transformer.serving.limits import RequestLimits
from keras_transformer.serving.metrics import Metrics
from keras_transformer.serving.rest import RestServer, make_handler
from tests.serving.conftest import wait_for

MAX_BODY = 1 << 24


class ScriptedModels:
    """`core.Models`' interface; `predict` takes `delay` seconds, and
    stops as the server's `alive` and `time_left` say."""

    def __init__(self):
        self.limits = RequestLimits(max_rows=50)
        self.metrics = Metrics()
        self.delay = 0.0
        self.lock = threading.Lock()
        self.running = self.peak = 0
        self.stopped = []

    def predict(self, name, inputs, signature, version, label, api, alive, time_left):
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            end = time.monotonic() + self.delay
            while time.monotonic() < end:
                if not alive():
                    self.stopped.append("client left")
                    raise ServingError("CANCELLED", "gone")
                if time_left() <= 0:
                    self.stopped.append("timeout")
                    raise ServingError("DEADLINE_EXCEEDED", "time is up")
                time.sleep(0.01)
            rows = len(next(iter(inputs.values())))
            return 1, signature or "serving_default", {"out": np.array([b"ok"] * rows, object)}
        finally:
            with self.lock:
                self.running -= 1

    def status(self, name, version, label):
        return [(1, 30, "")]


@pytest.fixture
def rest():
    servers = []

    def make(num_threads=4, timeout=5.0, max_connections=None):
        models = ScriptedModels()
        server = RestServer(
            ("127.0.0.1", 0), make_handler(models, MAX_BODY), num_threads, timeout,
            max_connections,
        )  # fmt: skip
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, models, server.server_address[1]

    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


def _post(port, body, headers=None, timeout=30, chunked=False):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", "/v1/models/m:predict", body=body, headers=headers or {},
                           encode_chunked=chunked)  # fmt: skip
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _exchange(port, data):
    """What the server answers `data` with, up to its closing the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


GOOD = json.dumps({"instances": ["a", "b"]}).encode()


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"instances": ["\\ud800"]}',
        b'{"instances": [' + b"9" * 5000 + b"]}",
        b'{"instances": ["a"], "signature_name": "\\udfff"}',
        b"\xff\xfe not utf-8",
        b"not json",
        b"",
        b"[]",
        b'{"instances": "a"}',
        b'{"instances": [{"b64": "!!"}]}',
        b'{"inputs": {"text": [1, 2]}}',
    ],
    ids=["deep", "surrogate", "long-number", "surrogate-name", "not-utf8", "not-json", "empty",
         "array", "not-list", "bad-b64", "numbers"],
)  # fmt: skip
def test_every_malformed_body_gets_a_json_400(rest, body):
    _, _, port = rest()
    status, answer = _post(port, body)
    assert status == 400 and isinstance(answer["error"], str)
    assert _post(port, GOOD) == (200, {"predictions": ["ok", "ok"]})


def test_a_request_pipelined_behind_a_bad_one_is_answered(rest):
    _, _, port = rest()
    bad = b'{"instances": ["\\ud800"]}'
    requests = b"".join(
        b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
        % (len(body), body)
        for body in (bad, GOOD)
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(requests)
        received = b""
        while received.count(b"HTTP/1.1 ") < 2 or not received.endswith(b"]}"):
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
    assert received.startswith(b"HTTP/1.1 400") and b"HTTP/1.1 200" in received


def test_a_body_of_empty_objects_is_refused_before_it_is_parsed(rest):
    _, _, port = rest()
    body = b'{"instances": [' + b"{}," * 1_000_000 + b"{}]}"
    tracemalloc.start()
    try:
        status, answer = _post(port, body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert status == 400 and "JSON values" in answer["error"]
    # The body itself is held by the client and the server; nothing of 26x.
    assert peak < 4 * len(body), peak


def test_a_large_good_body_costs_a_small_multiple_of_its_size(rest):
    _, _, port = rest()
    body = json.dumps({"instances": ["x" * 20_000 + f" {i}" for i in range(50)]}).encode()
    tracemalloc.start()
    try:
        status, _ = _post(port, body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert status == 200
    assert peak < 10 * len(body), peak


def test_a_chunked_body_is_accepted(rest):
    _, _, port = rest()
    chunks = iter([GOOD[:7], GOOD[7:20], GOOD[20:]])
    status, answer = _post(port, chunks, headers={"Transfer-Encoding": "chunked"}, chunked=True)
    assert (status, answer) == (200, {"predictions": ["ok", "ok"]})


@pytest.mark.parametrize(
    "headers,body",
    [
        ({"Transfer-Encoding": "gzip"}, b"x"),
        ({"Transfer-Encoding": "chunked", "Content-Length": "3"}, b"0\r\n\r\n"),
        ({"Transfer-Encoding": "chunked"}, b"zz\r\nab\r\n0\r\n\r\n"),
    ],
    ids=["gzip", "both", "bad-size"],
)
def test_bad_transfer_encodings_get_a_json_400(rest, headers, body):
    _, _, port = rest()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    answer = _exchange(port, f"POST /v1/models/m:predict HTTP/1.1\r\n{head}\r\n".encode() + body)
    assert answer.startswith(b"HTTP/1.1 400") and b'{"error": ' in answer


@pytest.mark.parametrize(
    "partial",
    [b"", b"POST /v1/models/m:predict HTTP/1.1\r\nContent-Le",
     b"POST /v1/models/m:predict HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"inst"],
    ids=["idle", "headers", "body"],
)  # fmt: skip
def test_a_stalled_connection_is_closed_after_the_timeout(rest, partial):
    server, _, port = rest(timeout=0.5)
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(8)]
    for sock in sockets:
        sock.sendall(partial)
    time.sleep(0.2)
    assert server.open_connections() == 8
    start = time.monotonic()
    for sock in sockets:
        assert sock.recv(1024) == b""
        sock.close()
    assert time.monotonic() - start < 5
    wait_for(lambda: not server.open_connections(), seconds=5)
    assert server.open_connections() == 0


def test_work_stops_when_its_client_leaves(rest):
    _, models, port = rest()
    models.delay = 30.0
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        b"POST /v1/models/m:predict HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(GOOD), GOOD)
    )
    time.sleep(0.3)
    assert models.running == 1
    sock.close()
    wait_for(lambda: not models.running, seconds=5, interval=0.02)
    assert models.stopped == ["client left"]


def test_work_past_the_timeout_is_answered_504(rest):
    _, models, port = rest(timeout=0.5)
    models.delay = 30.0
    start = time.monotonic()
    status, answer = _post(port, GOOD)
    assert status == 504 and time.monotonic() - start < 5
    assert models.stopped == ["timeout"]


def test_work_is_capped_at_the_thread_count(rest):
    _, models, port = rest(num_threads=2)
    models.delay = 0.3
    results = []
    threads = [threading.Thread(target=lambda: results.append(_post(port, GOOD)[0]))
               for _ in range(6)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [200] * 6
    assert models.peak == 2


def test_connections_over_the_cap_are_answered_503(rest):
    server, _, port = rest(max_connections=3)
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
    time.sleep(0.2)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as extra:
        assert extra.recv(1024).startswith(b"HTTP/1.1 503")
    for sock in held:
        sock.close()
    wait_for(lambda: not server.open_connections(), seconds=5)
    assert _post(port, GOOD)[0] == 200


def test_unknown_methods_and_bad_request_lines_get_json(rest):
    _, _, port = rest()
    answer = _exchange(port, b"PUT /v1/models/m HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 501") and b'{"error": ' in answer
    # A request line of no HTTP version is answered as HTTP/0.9: a body alone.
    assert _exchange(port, b"GARBAGE\r\n\r\n").startswith(b'{"error": ')
