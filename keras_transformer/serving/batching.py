"""Batching of concurrent requests, with large ones split into fair pieces."""

import logging
import queue
import threading
import time
from concurrent import futures

import numpy as np

log = logging.getLogger("keras_transformer.serve")

_NOTHING = object()
# How often a waiting request asks whether its client is still there.
_POLL_SECONDS = 0.05


class RequestCancelled(Exception):
    """The client cancelled the request."""


class DeadlineExceeded(RequestCancelled):
    """The request's deadline passed before its work was done."""


class Batcher:
    """Runs the requests of one signature in batches of at most
    `max_batch_size` rows.

    A request waits at most `timeout` seconds for company. A request larger
    than `max_batch_size` runs as batch-sized pieces, one after the other,
    each queued behind whatever arrived meanwhile: other requests are
    interleaved with it instead of waiting for all of it (TF Serving's
    large-batch splitting). With `split=False` such a request is refused.

    As in TF Serving, nothing is refused on a guess of how long it would
    take: before each piece, and again when a batch is formed, the request
    is asked whether its client is still there (`alive()`) and its deadline
    has not passed (`time_left()`); one that fails either stops consuming
    work. A run that raises fails the requests of its batch alone: the
    batcher goes on with the next.

    Args:
        run: `run(inputs) -> outputs`, dicts of arrays with rows first.
        max_batch_size: most rows in one run.
        timeout: seconds a request waits for others to join its batch.
        split: split large requests (else they are refused).

    Example:

    >>> batcher = Batcher(lambda x: {"twice": 2 * x["n"]}, max_batch_size=2)
    >>> batcher.submit({"n": np.arange(5)})["twice"].tolist()
    [0, 2, 4, 6, 8]
    >>> batcher.stop()
    """

    def __init__(self, run, max_batch_size=32, timeout=0.005, split=True):
        self.run = run
        self.max_batch_size = max_batch_size
        self.timeout = timeout
        self.split = split
        self.queue = queue.Queue()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def submit(self, inputs, alive=lambda: True, time_left=lambda: None):
        """Runs `inputs` (rows first, at least one row); returns the outputs.

        `alive()` is False once the client cancelled; `time_left()` is the
        seconds to the request's deadline, or None without one.

        Raises:
            RequestCancelled: `alive()` turned False before the work was done.
            DeadlineExceeded: the deadline passed before the work was done.
            ValueError: no rows, or too many rows with `split=False`.
        """
        rows = _rows(inputs)
        if rows == 0:
            raise ValueError("A batched request needs at least one row")
        if rows > self.max_batch_size and not self.split:
            raise ValueError(
                f"The request has {rows} rows, over the batch size of {self.max_batch_size}, "
                "and large requests are not split (--no-split-large-requests)"
            )
        request = _Request(alive, time_left)
        if rows <= self.max_batch_size:
            return self._piece(inputs, request)
        pieces = []
        for begin in range(0, rows, self.max_batch_size):
            piece = {k: v[begin : begin + self.max_batch_size] for k, v in inputs.items()}
            pieces.append(self._piece(piece, request))
        return {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}

    def _piece(self, inputs, request):
        request.check()
        done = futures.Future()
        self.queue.put((inputs, done, request))
        # Waits in short steps, so that a client who leaves frees its
        # server thread at once; the batch then skips its rows.
        while True:
            try:
                return done.result(timeout=_POLL_SECONDS)
            except futures.TimeoutError:
                if not done.running():
                    try:
                        request.check()
                    except RequestCancelled:
                        if done.cancel():  # not yet taken into a batch
                            raise
                if not self.thread.is_alive() and not done.done():
                    raise RuntimeError("The batcher has stopped") from None

    def stop(self):
        self.queue.put(None)

    def _loop(self):
        carried = _NOTHING  # what did not fit the previous batch
        while True:
            item = self.queue.get() if carried is _NOTHING else carried
            carried = _NOTHING
            if item is None:
                return
            batch = [item]
            rows = _rows(item[0])
            deadline = time.monotonic() + self.timeout
            while rows < self.max_batch_size:
                try:
                    nxt = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if nxt is None or rows + _rows(nxt[0]) > self.max_batch_size:
                    carried = nxt  # starts the next batch (or stops the loop)
                    break
                batch.append(nxt)
                rows += _rows(nxt[0])
            try:
                self._run(batch)
            except BaseException as error:  # the loop outlives any one batch
                log.exception("A batch failed")
                for _, done, _ in batch:
                    if not done.done():
                        done.set_exception(error)

    def _run(self, batch):
        live = []
        for inputs, done, request in batch:
            if not done.set_running_or_notify_cancel():
                continue  # its client left while it was queued
            try:
                request.check()
                live.append((inputs, done))
            except RequestCancelled as error:
                done.set_exception(error)
        if not live:
            return
        try:
            keys = live[0][0].keys()
            if len(live) == 1 or any(inputs.keys() != keys for inputs, _ in live):
                for inputs, done in live:
                    done.set_result(self.run(inputs))
                return
            sizes = [_rows(inputs) for inputs, _ in live]
            joined = {k: np.concatenate([inputs[k] for inputs, _ in live]) for k in keys}
            outputs = self.run(joined)
            offsets = np.cumsum([0] + sizes)
            for i, (_, done) in enumerate(live):
                done.set_result({k: v[offsets[i] : offsets[i + 1]] for k, v in outputs.items()})
        except Exception as error:  # every request of this batch learns of it
            for _, done in live:
                if not done.done():
                    done.set_exception(error)


class _Request:
    """What the batcher knows of a request's client."""

    def __init__(self, alive, time_left):
        self.alive = alive
        self.time_left = time_left

    def check(self):
        """Raises unless the client still waits and its deadline is ahead."""
        left = self.time_left()
        if left is not None and left <= 0:
            raise DeadlineExceeded("The request's deadline passed before its work was done")
        if not self.alive():
            raise RequestCancelled("The client cancelled the request")


def _rows(inputs):
    return len(next(iter(inputs.values())))
