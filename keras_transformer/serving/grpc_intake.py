"""Where gRPC calls enter the server: a flood of calls costs what the model leaves.

grpcio's thread-per-call server (`grpc.server`) takes every call from gRPC's
core on one Python thread (its intake), hands it to a pool thread, which
reads the request and runs the handler: two threads and four events of the
core's completion queue a call, about 200 microseconds of Python. A client
flooding the server with calls whose deadline passes on the way (or that it
cancels) makes that work, and gRPC's own I/O threads' work for the flood's
bytes, compete with the model for the CPU: on one CPU, under 64 clients
sending 1 ms deadlines, a well-behaved client's p95 went from 86 ms to 1.3 s.

Two changes, for the servers whose pool is a `CallPool`:

- A call whose deadline passed before the intake took it is answered
  `DEADLINE_EXCEEDED` on the intake thread itself (one batch of the core,
  no pool thread, its request never read) and counted (`on_expired`). As
  gRPC's core: a call that expired while waiting is not the application's
  work.
- The intake thread and gRPC's I/O threads (the core's `event_engine`
  threads) run `nice` steps below the rest of the server (Linux), so that
  while the model runs, the flood is taken with the CPU it leaves; a
  well-behaved call that arrives is taken as soon as the model is idle. The
  pool's threads are started by a thread of the server's own priority, so
  that handlers and the batcher never inherit the intake's.

grpcio has no public hook at its intake: `install` wraps `grpc._server.
_handle_call`, checked against the names and parameters it expects, and
leaves grpcio as it is (with a warning; expired calls are then answered on
the pool, as before) if they change. Servers whose pool is not a `CallPool`
are untouched.
"""

import inspect
import logging
import os
import queue
import sys
import threading
import time
from concurrent import futures

from keras_transformer._validation import check_nice_steps

log = logging.getLogger("keras_transformer.serve")

# The parameters of grpcio's `_handle_call` (grpcio 1.85) that `install` wraps.
_HANDLE_CALL_PARAMETERS = (
    "rpc_event", "method_with_handler", "interceptor_pipeline", "thread_pool",
    "concurrency_exceeded",
)  # fmt: skip
# How often the intake looks for new gRPC I/O threads to lower.
_RESCAN_SECONDS = 1.0
_installed = []
_install_lock = threading.Lock()


class CallPool(futures.Executor):
    """The gRPC server's pool: daemon threads, started as work needs them,
    up to `max_threads`.

    Work still running when the server stops does not hold the process (a
    `ThreadPoolExecutor`'s threads are joined at exit). Threads are started
    by a thread of their own, made with the pool, so that they have the
    priority of the thread that made the pool, not of the intake that
    submits to them.

    Args:
        max_threads: most threads.
        name: their name's prefix.
        on_expired: called (no arguments) for each call answered
            `DEADLINE_EXCEEDED` at intake.
        io_nice: how many `nice` steps below the process's main thread the
            intake and gRPC's I/O threads run (Linux; 0 leaves them, at
            most 19).

    Example:

    >>> pool = CallPool(2, "work")
    >>> pool.submit(sum, [1, 2]).result()
    3
    """

    def __init__(self, max_threads, name, on_expired=None, io_nice=0):
        check_nice_steps("io_nice", io_nice)
        self.max_threads = max_threads
        self.name = name
        self.on_expired = on_expired or (lambda: None)
        self.io_nice = io_nice
        self.queue = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads = 0
        # One release per thread that waits for work: a submit that takes
        # one has a thread ready for it, else it starts one.
        self.idle = threading.Semaphore(0)
        self._starts = queue.SimpleQueue()
        threading.Thread(target=self._starter, name=f"{name}-starter", daemon=True).start()
        # nice is per thread on Linux; elsewhere it would lower the process.
        self._lowering = io_nice > 0 and sys.platform.startswith("linux")
        self._lowered = set()  # native ids of threads already lowered
        self._scanned = float("-inf")

    def submit(self, fn, /, *args, **kwargs):
        future = futures.Future()
        self.queue.put((future, fn, args, kwargs))
        if not self.idle.acquire(blocking=False):
            with self.lock:
                if self.threads < self.max_threads:
                    self.threads += 1
                    self._starts.put(self.threads)
        return future

    def _starter(self):
        while True:
            number = self._starts.get()
            threading.Thread(target=self._work, name=f"{self.name}-{number}", daemon=True).start()

    def _work(self):
        while True:
            future, fn, args, kwargs = self.queue.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as error:
                    future.set_exception(error)
            del future, fn, args, kwargs  # a finished call's objects go now
            self.idle.release()

    def lower_io_threads(self):
        """Lowers the calling thread (the intake) and gRPC's I/O threads to
        `io_nice` steps below the process's main thread, once each; looks
        for new I/O threads at most once a second. Linux only: elsewhere
        `nice` applies to whole processes."""
        if not self._lowering:
            return
        now = time.monotonic()
        if now - self._scanned < _RESCAN_SECONDS:
            return
        self._scanned = now
        target = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + self.io_nice)
        threads = {threading.get_native_id()}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as comm:
                    if comm.read().startswith("event_engine"):
                        threads.add(int(tid))
            except OSError:  # it ended while listed
                continue
        self._lowered &= threads  # forget the threads that ended
        for tid in threads - self._lowered:
            try:
                if os.getpriority(os.PRIO_PROCESS, tid) < target:
                    os.setpriority(os.PRIO_PROCESS, tid, target)
            except OSError:
                continue
            self._lowered.add(tid)


def install():
    """Wraps grpcio's intake for the servers whose pool is a `CallPool`
    (idempotent); returns whether it could."""
    with _install_lock:
        if _installed:
            return _installed[0]
        _installed.append(_wrap_intake())
        return _installed[0]


def _wrap_intake():
    try:
        from grpc import _server
        from grpc._cython import cygrpc

        handle_call, reject = _server._handle_call, _server._reject_rpc
        rpc_state = _server._RPCState
        parameters = tuple(inspect.signature(handle_call).parameters)
        expired_code = cygrpc.StatusCode.deadline_exceeded
    except (ImportError, AttributeError, TypeError, ValueError) as error:
        parameters, error_text = (), repr(error)
    else:
        error_text = f"_handle_call{parameters}"
    if parameters != _HANDLE_CALL_PARAMETERS:
        log.warning(
            "grpcio %s's intake is not the one this server knows (%s): expired calls are "
            "answered on the pool", getattr(sys.modules.get("grpc"), "__version__", "?"),
            error_text,
        )  # fmt: skip
        return False

    def _handle_call(rpc_event, method_with_handler, interceptor_pipeline, thread_pool,
                     concurrency_exceeded):  # fmt: skip
        if isinstance(thread_pool, CallPool) and rpc_event.success:
            thread_pool.lower_io_threads()
            deadline = rpc_event.call_details.deadline
            if deadline is not None and deadline < time.time():
                state = rpc_state()
                reject(rpc_event, state, expired_code, b"Deadline Exceeded")
                thread_pool.on_expired()
                return state, None
        return handle_call(rpc_event, method_with_handler, interceptor_pipeline, thread_pool,
                           concurrency_exceeded)  # fmt: skip

    _server._handle_call = _handle_call
    return True
