"""What a careless or hostile client can do to the server: nothing."""

import json
import os
import re
import shutil
import signal
import threading
import time
import urllib.request

import grpc
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2

from keras_transformer.serving.grpc_client import GrpcTranslationClient
from keras_transformer.serving.limits import RequestLimits
from keras_transformer.serving.server import start_server
from tests.processes import (
    REPO,
    free_port,
    read_until,
    run_python,
    start_python,
    start_serve,
)
from tests.serving.conftest import copy_base, copy_version

LIMITS = RequestLimits(max_rows=400, max_string_bytes=200, max_request_bytes=20_000)
BATCH = 8


@pytest.fixture(scope="module")
def served(trained_model, serving_export):
    model, src, tgt = trained_model
    base = serving_export  # read only: tests that change versions copy it
    server, port, manager = start_server(
        base, "translator", port=0, poll_seconds=0, limits=LIMITS,
        batching={"max_batch_size": BATCH, "timeout": 0.002},
    )  # fmt: skip
    rows = []
    version = manager.versions[1]
    run = version.model.run

    def counted(signature, inputs):
        rows.append(len(inputs["text"]))
        return run(signature, inputs)

    version.model.run = counted  # counts the rows the session really runs
    yield {"base": base, "address": f"127.0.0.1:{port}", "manager": manager, "rows": rows,
           "model": (model, src, tgt), "port": port}  # fmt: skip
    server.stop(0)
    manager.stop()


@pytest.fixture(scope="module")
def cold_base(serving_export, tmp_path_factory):
    """The shared export without its warmup records, for the tests that
    start servers of their own: each start would replay them."""
    return copy_base(serving_export, tmp_path_factory.mktemp("cold"), warmup=False)


def _raw(address, tensor, signature="translate_greedy", timeout=60):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "translator"
    request.model_spec.signature_name = signature
    request.inputs["text"].CopyFrom(tensor)
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(
            "/tensorflow.serving.PredictionService/Predict",
            request_serializer=predict_pb2.PredictRequest.SerializeToString,
            response_deserializer=predict_pb2.PredictResponse.FromString,
        )
        return call(request, timeout=timeout)


def _answered(*args):
    """`_raw(*args)`'s status code name, for requests whose end is not the point."""
    try:
        _raw(*args)
        return "OK"
    except grpc.RpcError as error:
        return error.code().name


def _tensor(dims, values=(), dtype=types_pb2.DT_STRING):
    shape = tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims]
    )
    return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape, string_val=list(values))


@pytest.mark.parametrize(
    "tensor,match",
    [
        (_tensor([5000, 5000], [b"x"]), "rank 1"),
        (_tensor([300]), "declares shape \\[300\\]"),
        (_tensor([3], [b"a", b"b"]), "carries 2 string values"),
        (_tensor([2], [b"a", b"b"], dtype=types_pb2.DT_INT32), "must be a string tensor"),
        (_tensor([500], [b"x"] * 500), "--max-request-rows"),
        (_tensor([1], [b"y" * 201]), "--max-string-bytes"),
        (_tensor([200], [b"z" * 150] * 200), "--max-request-bytes"),
        (tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING), "rank 1; received shape \\[\\]"),
    ],
    ids=["rank", "no-values", "too-few", "dtype", "rows", "string", "request", "no-shape"],
)
def test_bad_requests_are_refused_before_any_work(served, tensor, match):
    before = len(served["rows"])
    with pytest.raises(grpc.RpcError) as caught:
        _raw(served["address"], tensor)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.match(match)
    assert len(served["rows"]) == before


_LONG = "n" * 100_000


def _long_name_call(served, where):
    """A call naming something `_LONG` at `where`; its `RpcError`."""
    from tensorflow_serving.apis import get_model_metadata_pb2, prediction_service_pb2_grpc

    request = predict_pb2.PredictRequest()
    request.model_spec.name = _LONG if where == "model" else "translator"
    request.model_spec.signature_name = _LONG if where == "signature" else "translate_greedy"
    if where == "label":
        request.model_spec.version_label = _LONG
    request.inputs[_LONG if where == "input" else "text"].CopyFrom(_tensor([1], [b"a"]))
    if where == "output_filter":
        request.output_filter.extend([_LONG, "x" + _LONG] + [f"o{i}" for i in range(10_000)])
    with grpc.insecure_channel(served["address"]) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        try:
            if where == "metadata_field":
                metadata = get_model_metadata_pb2.GetModelMetadataRequest()
                metadata.model_spec.name = "translator"
                metadata.metadata_field.extend([_LONG] + [f"f{i}" for i in range(10_000)])
                stub.GetModelMetadata(metadata, timeout=60)
            else:
                stub.Predict(request, timeout=60)
        except grpc.RpcError as error:
            return error
    raise AssertionError(f"a {where} of 100,000 characters was answered")


@pytest.mark.parametrize(
    "where,code",
    [("model", "NOT_FOUND"), ("signature", "NOT_FOUND"), ("label", "INVALID_ARGUMENT"),
     ("input", "INVALID_ARGUMENT"), ("output_filter", "INVALID_ARGUMENT"),
     ("metadata_field", "INVALID_ARGUMENT")],
)  # fmt: skip
def test_a_name_of_any_length_is_answered_with_its_status(served, where, code):
    """A name the server echoes in its error is cut: a status whose message
    passed gRPC's 16 KiB limit on metadata reached the client as
    RESOURCE_EXHAUSTED ("Stream removed") instead of the server's answer."""
    error = _long_name_call(served, where)
    assert error.code().name == code, error.details()[:300]
    assert len(error.details()) < 1000 and "(100000 characters)" in error.details()


def test_a_large_request_runs_in_pieces_beside_a_small_one(served):
    big = [f"The dog {i} sleeps." for i in range(300)]
    finished = {}

    def send(name, sentences):
        with GrpcTranslationClient(served["address"], "translator", timeout=300) as client:
            out = client.translate(sentences, signature="translate_greedy")
        finished[name] = (time.monotonic(), out)

    del served["rows"][:]
    large = threading.Thread(target=send, args=("large", big))
    large.start()
    while len(served["rows"]) < 2:  # the large request is under way
        time.sleep(0.01)
    send("small", ["A cat runs."])
    large.join()
    assert finished["small"][0] < finished["large"][0]
    assert len(finished["large"][1]["translation"]) == 300
    assert max(served["rows"]) <= BATCH
    # The same translations as a request of one sentence each.
    with GrpcTranslationClient(served["address"], "translator") as client:
        alone = client.translate(big[:3] + big[-2:], signature="translate_greedy")["translation"]
    assert (
        finished["large"][1]["translation"][:3] + finished["large"][1]["translation"][-2:] == alone
    )


def test_an_expired_request_stops_consuming_work(served):
    tensor = _tensor([400], [f"The old man {i} reads.".encode() for i in range(400)])
    start = time.monotonic()
    _raw(served["address"], tensor, signature="serving_default")
    whole = time.monotonic() - start
    del served["rows"][:]
    with pytest.raises(grpc.RpcError) as caught:
        _raw(served["address"], tensor, signature="serving_default", timeout=whole / 4)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    time.sleep(whole / 2)  # the piece in flight finishes; no more are started
    assert 0 < sum(served["rows"]) < 400
    with GrpcTranslationClient(served["address"], "translator") as client:
        assert client.translate(["The dog sleeps."])["version"] == 1


def test_splitting_can_be_refused(cold_base):
    server, port, manager = start_server(
        cold_base, "translator", port=0, poll_seconds=0,
        batching={"max_batch_size": 4, "split": False},
    )  # fmt: skip
    try:
        with pytest.raises(grpc.RpcError) as caught:
            _raw(f"127.0.0.1:{port}", _tensor([5], [b"a"] * 5))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.match("--no-split-large-requests")
    finally:
        server.stop(0)
        manager.stop()


def test_a_port_in_use_is_an_error(served, cold_base):
    with pytest.raises(OSError, match="in use"):
        start_server(cold_base, "translator", port=served["port"], poll_seconds=0)
    result = run_python(
        "-m", "keras_transformer.cli", "serve", "--model-base-path", cold_base,
        "--model-name", "translator", "--port", str(served["port"]),
    )  # fmt: skip
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"127.0.0.1:{served['port']}" in result.stderr.strip().splitlines()[-1]


def test_a_refused_version_is_retried_when_its_files_change(served, tmp_path):
    base = str(tmp_path / "translator")
    copy_version(os.path.join(served["base"], "1"), os.path.join(base, "1"))
    broken = os.path.join(base, "2")
    os.makedirs(broken)
    with open(os.path.join(broken, "saved_model.pb"), "wb") as f:
        f.write(b"half written")
    manager = start_server(base, "translator", port=0, poll_seconds=0)[2]
    try:
        assert set(manager.versions) == {1} and 2 in manager.failed
        assert manager.statuses()[2][1]  # the load's error is kept
        # The writer finishes: saved_model.pb and the variables arrive.
        shutil.rmtree(broken)
        copy_version(os.path.join(served["base"], "1"), broken)
        manager.refresh()
        assert set(manager.versions) == {2} and 2 not in manager.failed
    finally:
        manager.stop()


def test_sigterm_drains_requests_in_flight(cold_base):
    server, port = start_serve(cold_base, "--poll-seconds", "0", "--max-batch-size", "4")
    try:
        result = {}

        def slow():
            with GrpcTranslationClient(f"127.0.0.1:{port}", "translator", timeout=300) as c:
                result["out"] = c.translate([f"The cat {i} sees the dog." for i in range(120)])

        thread = threading.Thread(target=slow)
        thread.start()
        time.sleep(1.0)
        server.send_signal(signal.SIGTERM)
        thread.join(300)
        assert len(result["out"]["translation"]) == 120
        assert server.wait(120) == 0
    finally:
        if server.poll() is None:
            server.kill()


def test_warmup_records_are_replayed_before_serving(served):
    from keras_transformer.runtime import SIGNATURES

    # Batches of 1 and 8 for every signature.
    assert served["manager"].versions[1].warmed_up == 2 * len(SIGNATURES)


def test_warmup_can_be_left_off(served):
    # As TF Serving's --enable_model_warmup=false: the same export serves
    # at once, and its first request runs what the records would have.
    server, port, manager = start_server(served["base"], "translator", port=0, poll_seconds=0,
                                         warmup=False)  # fmt: skip
    try:
        assert manager.versions[1].warmed_up == 0
        with GrpcTranslationClient(f"127.0.0.1:{port}", "translator") as cold, \
                GrpcTranslationClient(served["address"], "translator") as warm:  # fmt: skip
            assert cold.translate(["The dog sleeps."]) == warm.translate(["The dog sleeps."])
    finally:
        server.stop(0)
        manager.stop()


def test_a_failing_warmup_refuses_the_version(served, tmp_path):
    base = str(tmp_path / "translator")
    shutil.copytree(os.path.join(served["base"], "1"), os.path.join(base, "3"))
    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = "translate_everything"
    request.inputs["text"].CopyFrom(_tensor([1], [b"x"]))
    from tensorflow_serving.apis import prediction_log_pb2

    record = prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    )
    path = os.path.join(base, "3", "assets.extra", "tf_serving_warmup_requests")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(record.SerializeToString())
    manager = start_server(base, "translator", port=0, poll_seconds=0)[2]
    try:
        assert manager.versions == {} and "translate_everything" in manager.failed[3][1]
    finally:
        manager.stop()


def _settled_rss(process, seconds=1.5):
    """The least resident memory over `seconds`: what the process holds
    after a swap, past the old version's unloading and any transient
    allocation (one reading once caught a passing 11%, failing a run)."""
    readings = []
    deadline = time.time() + seconds
    while time.time() < deadline:
        time.sleep(0.25)
        readings.append(process.memory_info().rss)
    return min(readings)


def test_memory_stays_flat_across_hot_swaps(served, tmp_path):
    psutil = pytest.importorskip("psutil")
    base = str(tmp_path / "translator")
    copy_version(os.path.join(served["base"], "1"), os.path.join(base, "1"))
    server, port = start_serve(base, "--poll-seconds", "0.2")
    rss = []
    try:
        threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()
        process = psutil.Process(server.pid)
        with GrpcTranslationClient(f"127.0.0.1:{port}", "translator", timeout=120) as client:
            for number in range(2, 7):
                copy_version(os.path.join(served["base"], "1"), os.path.join(base, str(number)))
                deadline = time.time() + 120
                while client.translate(["The dog sleeps."])["version"] != number:
                    assert time.time() < deadline, f"version {number} was not served"
                    time.sleep(0.1)
                shutil.rmtree(os.path.join(base, str(number - 1)))
                rss.append(_settled_rss(process))
    finally:
        server.terminate()
        server.wait(60)
    # The first swap builds what every later load reuses; then 4 more (a
    # leak of a version's model grows each by the same step).
    assert max(rss[1:]) <= rss[1] * 1.10, [r >> 20 for r in rss]


SIGNATURES_OF_TEXT = ("serving_default", "translate_greedy", "translate_nbest", "attention",
                      "translate_sample")  # fmt: skip


def test_empty_requests_are_answered_and_change_nothing(served):
    for signature in SIGNATURES_OF_TEXT:
        response = _raw(served["address"], _tensor([0]), signature=signature)
        assert response.outputs and all(
            tensor.tensor_shape.dim[0].size == 0 for tensor in response.outputs.values()
        )
    for _ in range(20):  # each once broke its signature's batcher for good
        _raw(served["address"], _tensor([0]), signature="translate_greedy")
    with GrpcTranslationClient(served["address"], "translator", timeout=30) as client:
        for signature in SIGNATURES_OF_TEXT[:2]:
            assert len(client.translate(["The dog sleeps."], signature=signature)["translation"])


def test_status_and_metadata_are_answered_while_predicts_are_busy(cold_base):
    from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

    server, port, manager = start_server(
        cold_base, "translator", port=0, poll_seconds=0, max_workers=1,
        batching={"max_batch_size": 1, "timeout": 0.0},
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    tensor = _tensor([400], [f"The old man {i} reads.".encode() for i in range(400)])
    busy = [threading.Thread(target=_answered, args=(address, tensor, "serving_default", 4))
            for _ in range(4)]  # fmt: skip
    try:
        for thread in busy:
            thread.start()
        time.sleep(1.0)
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = "translator"
        with grpc.insecure_channel(address) as channel:
            stub = model_service_pb2_grpc.ModelServiceStub(channel)
            start = time.monotonic()
            stub.GetModelStatus(request, timeout=30)
            assert time.monotonic() - start < 1.0
        with GrpcTranslationClient(address, "translator", timeout=30) as client:
            start = time.monotonic()
            client.metadata()
            assert time.monotonic() - start < 1.0
    finally:
        for thread in busy:
            thread.join()
        server.stop(0).wait()
        manager.stop()


def test_a_stuck_request_does_not_hold_the_stop(cold_base):
    before = {t for t in threading.enumerate() if not t.daemon}
    server, port, manager = start_server(cold_base, "translator", port=0, poll_seconds=0)
    # None holds the exit. A thread of an earlier test's stop (grpcio's
    # cancel_all_calls_after_grace) may end meanwhile: only new ones count.
    assert {t for t in threading.enumerate() if not t.daemon} - before == set()
    stuck = threading.Event()
    manager.versions[1].model.run = lambda signature, inputs: stuck.wait()
    thread = threading.Thread(target=_answered, args=(f"127.0.0.1:{port}", _tensor([1], [b"x"])))
    thread.start()
    time.sleep(0.5)
    start = time.monotonic()
    try:
        assert server.stop(0.5).wait(10)
        assert time.monotonic() - start < 3.0
        thread.join(10)
        assert not thread.is_alive()  # the client was answered (CANCELLED or UNAVAILABLE)
    finally:
        stuck.set()
        manager.stop()


def test_sigterm_exits_within_the_drain_whatever_runs(cold_base):
    from keras_transformer.serving.server import EXIT_GRACE_SECONDS

    server, port = start_serve(
        cold_base, "--poll-seconds", "0", "--max-batch-size", "1", "--drain-seconds", "1"
    )
    try:
        tensor = _tensor([400], [f"The old man {i} reads.".encode() for i in range(400)])
        clients = [
            threading.Thread(target=_answered,
                             args=(f"127.0.0.1:{port}", tensor, "serving_default", 300))
            for _ in range(3)
        ]  # fmt: skip
        for thread in clients:
            thread.start()
        time.sleep(1.5)
        start = time.monotonic()
        server.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0
        assert time.monotonic() - start < 1 + EXIT_GRACE_SECONDS + 5
        for thread in clients:
            thread.join(30)
    finally:
        if server.poll() is None:
            server.kill()


def _good_client(address, requests, period=0.25):
    """`requests` one-sentence requests, one every `period` s (or as soon as
    the last is answered), with a 20 s deadline, on a connection of their
    own; returns the status code name of each."""
    codes = []
    with GrpcTranslationClient(address, "translator", timeout=20) as client:
        while len(codes) < requests:
            started = time.monotonic()
            try:
                client.translate(["The dog sleeps."])
                codes.append("OK")
            except grpc.RpcError as error:
                codes.append(error.code().name)
            time.sleep(max(0.0, period - (time.monotonic() - started)))
    return codes


def _thread_nice(pid):
    """`{thread name: {nice values}}` of a process's threads, and the nice
    value of its main thread (Linux)."""
    nice, main = {}, None
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                name, _, rest = stat.read().partition("(")[2].rpartition(")")
        except FileNotFoundError:  # the thread ended since it was listed
            continue
        value = int(rest.split()[16])
        nice.setdefault(name, set()).add(value)
        main = value if int(tid) == pid else main
    return nice, main


def test_a_good_client_loses_nothing_while_others_flood_with_expiring_calls(serving_export):
    """64 clients on connections of their own send calls that expire on
    arrival (1 ms deadlines), then cancel theirs after 0-20 ms, from a
    process of their own; a client beside them loses no request (gRPC's
    core once cancelled arriving calls of every connection). A flooding
    connection may also be refused streams (UNAVAILABLE) past its 100.
    The cancelling connections are found out, and their calls held: many
    are dropped before any work, counted as CANCELLED at intake."""
    rest_port = free_port()
    server, port = start_serve(serving_export, "--poll-seconds", "0", "--no-enable-model-warmup",
                               "--rest-api-port", str(rest_port))  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        assert _good_client(address, 4) == ["OK"] * 4
        refused = "UNAVAILABLE"
        for mode, answers in (("expired", {"DEADLINE_EXCEEDED", refused}),
                              ("cancelled", {"CANCELLED_BY_CLIENT", "OK", refused})):  # fmt: skip
            # The flood lasts until the good client's 8 requests are
            # answered, however slowly: SIGTERM ends it.
            flood = start_python("-m", "tests.serving.flood", address, mode, "64", "120", cwd=REPO)
            try:
                read_until(flood, "FLOODING", "the flood", timeout=60)  # past its imports
                codes = _good_client(address, 8)
            finally:
                flood.terminate()
            counts = json.loads(flood.communicate(timeout=60)[0].strip().splitlines()[-1])
            assert codes == ["OK"] * 8, (mode, codes)
            assert sum(counts.values()) > 1000 and set(counts) <= answers, (mode, counts)
        metrics = urllib.request.urlopen(
            f"http://127.0.0.1:{rest_port}/monitoring/prometheus/metrics", timeout=30
        ).read().decode()  # fmt: skip
        held = re.search(r'request_count\{model_name="<unknown>".*status="CANCELLED"\} (\d+)',
                         metrics)  # fmt: skip
        assert held and int(held.group(1)) > 100, metrics[-3000:]
        # The flood was taken below the model's priority: gRPC's intake and
        # I/O threads run 10 nice steps down, the sessions' threads level
        # with the main thread (whatever nice the test runs under).
        nice, main = _thread_nice(server.pid)
        assert nice["event_engine"] == {min(19, main + 10)}, nice
        assert nice["tf_Compute"] == {main}, nice
    finally:
        server.terminate()
        server.wait(60)
