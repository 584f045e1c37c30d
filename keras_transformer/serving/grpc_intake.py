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
- A call of a connection whose client cancelled most of its recent calls
  (`cancelling.CancellingClients`) is held, off the pool, until it is due:
  if its client cancels it meanwhile, it is dropped without a pool thread,
  the read of its request or the model's work (`on_cancelled`); else it
  goes to the pool, and its handler learns that it was held
  (`running_held_call`): the server lets such a call yield to the others
  (`batching.Batcher`), as a cancel that came meanwhile may not have been
  read yet.
- The intake thread and gRPC's I/O threads (the core's `event_engine`
  threads) run `nice` steps below the rest of the server (Linux), so that
  while the model runs, the flood is taken with the CPU it leaves; a
  well-behaved call that arrives is taken as soon as the model is idle. The
  pool's threads are started by a thread of the server's own priority, so
  that handlers and the batcher never inherit the intake's.

grpcio has no public hook at its intake: `install` wraps `grpc._server.
_handle_call`, checked against the names and parameters it expects, and
leaves grpcio as it is (with a warning; expired calls are then answered on
the pool, as before, and no call is held) if they change. Servers whose pool
is not a `CallPool` are untouched.
"""

import heapq
import inspect
import itertools
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
# How often held calls that are due go to the pool.
_HOLD_TICK_SECONDS = 0.01
_installed = []
_install_lock = threading.Lock()
_running = threading.local()


def running_held_call():
    """Whether the calling thread runs the handler of a call that was held
    (its connection cancels most of its calls)."""
    return getattr(_running, "held", False)


def _run_held(fn, args, kwargs):
    _running.held = True
    try:
        return fn(*args, **kwargs)
    finally:
        _running.held = False


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
        cancelling: a `CancellingClients` that the intake keeps, and by
            which it holds the calls of connections that cancel most of
            theirs; None holds no call.
        on_cancelled: called (no arguments) for each held call dropped
            because its client cancelled it.

    Example:

    >>> pool = CallPool(2, "work")
    >>> pool.submit(sum, [1, 2]).result()
    3
    """

    def __init__(self, max_threads, name, on_expired=None, io_nice=0, cancelling=None,
                 on_cancelled=None):  # fmt: skip
        check_nice_steps("io_nice", io_nice)
        self.max_threads = max_threads
        self.name = name
        self.on_expired = on_expired or (lambda: None)
        self.cancelling = cancelling
        self.on_cancelled = on_cancelled or (lambda: None)
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
        self._held = []  # heap of (due, number, _HeldCall)
        self._held_lock = threading.Lock()
        self._held_numbers = itertools.count()
        self._holding = threading.Event()  # set while the heap holds calls
        if cancelling is not None:
            threading.Thread(target=self._release_due, name=f"{name}-holder", daemon=True).start()

    def submit(self, fn, /, *args, **kwargs):
        future = futures.Future()
        self.queue.put((future, fn, args, kwargs))
        if not self.idle.acquire(blocking=False):
            with self.lock:
                if self.threads < self.max_threads:
                    self.threads += 1
                    self._starts.put(self.threads)
        return future

    def hold(self, seconds):
        """What the intake submits a call's work to instead of the pool: it
        keeps the work `seconds`, then gives it to the pool, unless the
        call ends first (`_HeldCall.drop`)."""
        return _HeldCall(self, time.monotonic() + seconds)

    def _keep(self, held):
        with self._held_lock:
            heapq.heappush(self._held, (held.due, next(self._held_numbers), held))
            if len(self._held) == 1:
                self._holding.set()

    def _release_due(self):
        # One thread wakes every tick for all held calls: a held call costs
        # no thread of its own, and no wake-up of its own. With none held,
        # it sleeps until one is.
        while True:
            self._holding.wait()
            time.sleep(_HOLD_TICK_SECONDS)
            now, due = time.monotonic(), []
            with self._held_lock:
                while self._held and self._held[0][0] <= now:
                    due.append(heapq.heappop(self._held)[2])
                if not self._held:
                    self._holding.clear()
            for held in due:
                held.release()

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


class _HeldCall:
    """A call's work kept from the pool until `due` (monotonic seconds):
    grpcio's intake submits it here as to the pool, and gets a future that
    the pool's future completes, or that completes with no work done if the
    call ends first."""

    def __init__(self, pool, due):
        self.pool = pool
        self.due = due
        self.lock = threading.Lock()
        self.work = None
        self.future = futures.Future()

    def submit(self, fn, /, *args, **kwargs):
        with self.lock:
            self.work = (fn, args, kwargs)
        self.pool._keep(self)
        return self.future

    def release(self):
        """Gives the work to the pool (once it is due)."""
        with self.lock:
            work, self.work = self.work, None
        if work is not None:
            fn, args, kwargs = work
            self.pool.submit(_run_held, fn, args, kwargs).add_done_callback(self._finish)

    def drop(self):
        """The call ended while held: its work is never done. Returns
        whether it was still held."""
        with self.lock:
            work, self.work = self.work, None
        if work is not None:
            self.future.set_result(None)
        return work is not None

    def _finish(self, done):
        if done.exception() is not None:
            self.future.set_exception(done.exception())
        else:
            self.future.set_result(done.result())


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
        # How a call's end is watched: its state's callbacks run once it is
        # over, and `client` tells whether its client cancelled it.
        client_cancelled = _server._CANCELLED
        probe = rpc_state()
        if probe.callbacks != [] or not all(hasattr(probe, a) for a in ("client", "condition")):
            raise AttributeError("_RPCState has no callbacks, client or condition")
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
        if not isinstance(thread_pool, CallPool) or not rpc_event.success:
            return handle_call(rpc_event, method_with_handler, interceptor_pipeline,
                               thread_pool, concurrency_exceeded)  # fmt: skip
        thread_pool.lower_io_threads()
        deadline = rpc_event.call_details.deadline
        if deadline is not None and deadline < time.time():
            state = rpc_state()
            reject(rpc_event, state, expired_code, b"Deadline Exceeded")
            thread_pool.on_expired()
            return state, None
        cancelling = thread_pool.cancelling
        if cancelling is None:
            return handle_call(rpc_event, method_with_handler, interceptor_pipeline,
                               thread_pool, concurrency_exceeded)  # fmt: skip
        taken, peer = time.monotonic(), rpc_event.call.peer()
        seconds = cancelling.hold(peer)
        held = thread_pool.hold(seconds) if seconds > 0 else None
        state, future = handle_call(rpc_event, method_with_handler, interceptor_pipeline,
                                    held or thread_pool, concurrency_exceeded)  # fmt: skip
        if future is None:  # answered at once (no such method, too many calls)
            return state, future

        def ended():  # on this thread, once the call is over
            cancelled = state.client == client_cancelled
            expired = deadline is not None and deadline <= time.time()
            if held is not None and cancelled and held.drop():
                (thread_pool.on_expired if expired else thread_pool.on_cancelled)()
            if not expired:  # a deadline passing is not its client's doing
                cancelling.record(peer, cancelled, time.monotonic() - taken)

        with state.condition:
            if state.callbacks is not None:
                state.callbacks.append(ended)
        return state, future

    _server._handle_call = _handle_call
    return True
