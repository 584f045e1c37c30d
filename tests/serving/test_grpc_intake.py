"""`grpc_intake`: expired calls answered where calls enter, below the model's priority."""

import json
import os
import sys
import threading
import time
from concurrent import futures

import grpc
import pytest

from keras_transformer.serving.cancelling import CancellingClients
from keras_transformer.serving.grpc_intake import CallPool, install, running_held_call
from tests.processes import REPO, run_python
from tests.serving.conftest import wait_for

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread nice is Linux's")


def _nice(tid=0):
    return os.getpriority(os.PRIO_PROCESS, tid or threading.get_native_id())


def test_the_pool_runs_work_on_at_most_max_threads():
    pool = CallPool(3, "test")
    gate = threading.Event()
    running = []

    def work(i):
        running.append(threading.current_thread().name)
        gate.wait(10)
        return i * i

    submitted = [pool.submit(work, i) for i in range(8)]
    time.sleep(0.3)
    assert len(running) == 3 and pool.threads == 3
    gate.set()
    assert [f.result(10) for f in submitted] == [i * i for i in range(8)]
    assert pool.threads == 3  # threads that finished took the rest


@linux
def test_pool_threads_keep_the_priority_of_the_pools_maker():
    """The intake (here a thread that lowered itself) submits; the threads
    it starts must not inherit its lower priority."""
    pool = CallPool(2, "test")
    answers = {}

    def intake():
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, _nice() + 5))
        answers["intake"] = _nice()
        answers["worker"] = pool.submit(_nice).result(10)

    thread = threading.Thread(target=intake)
    thread.start()
    thread.join(10)
    assert answers["intake"] > answers["worker"] == _nice()


@pytest.mark.parametrize("io_nice", [-1, 20, 1.5])
def test_io_nice_out_of_range_is_refused(io_nice):
    with pytest.raises(ValueError, match="io_nice"):
        CallPool(2, "test", io_nice=io_nice)


class _Service(grpc.GenericRpcHandler):
    """`/t.S/Block` holds the intake thread (handlers are looked up there);
    `/t.S/Echo` counts the calls that reach the pool, and notes whether
    each was held; `/t.S/Slow` counts them, then works 0.3 s."""

    def __init__(self):
        self.echoed = 0
        self.held = []

    def echo(self, request, context):
        self.echoed += 1
        self.held.append(running_held_call())
        return request

    def slow(self, request, context):
        self.echoed += 1
        time.sleep(0.3)
        return request

    def service(self, details):
        if details.method == "/t.S/Block":
            time.sleep(0.5)
        if details.method == "/t.S/Slow":
            return grpc.unary_unary_rpc_method_handler(self.slow)
        return grpc.unary_unary_rpc_method_handler(self.echo)


def _server(pool):
    server = grpc.server(pool)
    service = _Service()
    server.add_generic_rpc_handlers((service,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port, service


@pytest.mark.parametrize("ours", [True, False])
def test_calls_expired_before_the_intake_took_them_never_reach_the_pool(ours):
    assert install()
    expired = []
    pool = CallPool(4, "test", on_expired=lambda: expired.append(1)) if ours else (
        futures.ThreadPoolExecutor(4))  # fmt: skip
    server, port, service = _server(pool)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            block, echo = channel.unary_unary("/t.S/Block"), channel.unary_unary("/t.S/Echo")
            held = block.future(b"b", timeout=10)
            time.sleep(0.1)  # the intake is held for 0.5 s
            late = [echo.future(b"x", timeout=0.1) for _ in range(10)]
            good = echo.future(b"g", timeout=10)
            assert held.result() == b"b" and good.result() == b"g"
            for call in late:
                assert call.exception().code() == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        server.stop(0).wait()
    if ours:  # answered at intake, counted, never run
        assert (len(expired), service.echoed) == (10, 2)
    else:  # grpcio's own path: the pool is handed each one
        assert not expired and service.echoed == 2


@pytest.mark.parametrize("ours", [True, False])
def test_calls_of_a_connection_that_cancels_most_of_its_calls_wait_and_are_dropped(ours):
    """A connection whose client cancels its calls 50 ms after sending them
    is found out from its fifth call; its next calls wait (1 s here) before
    any thread: those it cancels meanwhile are never worked on, one it
    keeps is answered after the wait, and its handler knows it was held.
    Another connection is never held."""
    assert install()
    cancelling = CancellingClients(min_hold=1.0, max_hold=1.0) if ours else None
    dropped = []
    pool = CallPool(8, "test", cancelling=cancelling, on_cancelled=lambda: dropped.append(1))
    server, port, service = _server(pool)
    own = [("grpc.use_local_subchannel_pool", 1)]  # a connection each
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=own) as flooding, \
                grpc.insecure_channel(f"127.0.0.1:{port}", options=own) as good:  # fmt: skip
            slow = flooding.unary_unary("/t.S/Slow")

            def cancelled_calls(count):
                for _ in range(count):
                    call = slow.future(b"x", timeout=10)
                    time.sleep(0.05)
                    call.cancel()

            cancelled_calls(12)  # the first four reach the handler, and are cancelled there
            if ours:
                assert wait_for(lambda: any(r[0].value >= cancelling.share
                                            for r in list(cancelling.records.values())),
                                seconds=10, interval=0.02), "timed out"  # fmt: skip
            time.sleep(0.4)  # the last ones' handlers return
            reached = service.echoed
            cancelled_calls(5)
            time.sleep(1.5)  # past the hold
            started = time.monotonic()
            assert flooding.unary_unary("/t.S/Echo")(b"k", timeout=10) == b"k"
            kept = time.monotonic() - started
            started = time.monotonic()
            assert good.unary_unary("/t.S/Echo")(b"g", timeout=10) == b"g"
            other = time.monotonic() - started
    finally:
        server.stop(0).wait()
    if ours:
        # held from the fifth call of the first dozen (the sixth if the
        # fourth's end is recorded after the fifth arrives), then the five
        assert service.echoed - reached == 2 and len(dropped) in (12, 13)
        assert kept >= 0.9 and other < 0.9  # held calls wait the whole 1 s
        assert service.held == [True, False]
    else:  # every call reaches the handler
        assert service.echoed - reached == 7 and not dropped
        assert service.held == [False, False]


_LOWERED = """
import json, os, threading
import grpc
from keras_transformer.serving.cancelling import CancellingClients
from keras_transformer.serving.grpc_intake import CallPool, install
from tests.serving.test_grpc_intake import _nice, _server
assert install()
pool = CallPool(4, "test", io_nice=3)
server, port, _ = _server(pool)
with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
    assert channel.unary_unary("/t.S/Echo")(b"x", timeout=10) == b"x"
lowered = {}
for tid in pool._lowered:
    with open(f"/proc/self/task/{tid}/comm") as comm:
        lowered.setdefault(comm.read().strip(), []).append(_nice(tid))
print(json.dumps({"lowered": lowered, "main": _nice(os.getpid()),
                  "handler": pool.submit(_nice).result(10)}))
server.stop(0).wait()
"""


@linux
def test_the_intake_and_grpc_io_threads_run_io_nice_steps_below_the_server():
    """In a process of its own: lowered threads stay lowered."""
    answer = run_python("-c", _LOWERED, cwd=REPO, timeout=120)
    assert answer.returncode == 0, answer.stderr[-2000:]
    seen = json.loads(answer.stdout.strip().splitlines()[-1])
    target = min(19, seen["main"] + 3)
    assert "event_engine" in seen["lowered"], seen  # gRPC's I/O threads
    assert {n for values in seen["lowered"].values() for n in values} == {target}, seen
    assert seen["handler"] == seen["main"]  # handlers stay level
