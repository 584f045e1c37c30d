"""Batching of concurrent requests, with large ones split into fair pieces."""

import queue
import threading
import time
from concurrent import futures

import numpy as np

_NOTHING = object()


class RequestCancelled(Exception):
    """The client cancelled the request."""


class DeadlineExceeded(RequestCancelled):
    """The request's deadline passed, or would before its work is done."""


class Batcher:
    """Runs the requests of one signature in batches of at most
    `max_batch_size` rows.

    A request waits at most `timeout` seconds for company. A request larger
    than `max_batch_size` runs as batch-sized pieces, one after the other,
    each queued behind whatever arrived meanwhile: other requests are
    interleaved with it instead of waiting for all of it (TF Serving's
    large-batch splitting). With `split=False` such a request is refused.
    Before each piece, and again when a batch is formed, the request's
    `alive()` is asked: a cancelled or expired request stops consuming work.
    A request with a deadline (`time_left()`) is also dropped when the
    batch it would run in cannot finish before it, judged by the measured
    seconds per row: its answer would come after the client has gone.

    Args:
        run: `run(inputs) -> outputs`, dicts of arrays with rows first.
        max_batch_size: most rows in one run.
        timeout: seconds a request waits for others to join its batch.
        split: split large requests (else they are refused).
    """

    def __init__(self, run, max_batch_size=32, timeout=0.005, split=True):
        self.run = run
        self.max_batch_size = max_batch_size
        self.timeout = timeout
        self.split = split
        self.queue = queue.Queue()
        self.seconds_per_row = 0.0  # moving average of measured runs
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def submit(self, inputs, alive=lambda: True, time_left=lambda: None):
        """Runs `inputs` (rows first); returns the outputs.

        `alive()` is False once the client cancelled; `time_left()` is the
        seconds to the request's deadline, or None without one.

        Raises:
            RequestCancelled: `alive()` turned False before the work was done.
            ValueError: too many rows with `split=False`.
        """
        rows = len(next(iter(inputs.values())))
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
        request.check(_rows(inputs) * self.seconds_per_row)
        done = futures.Future()
        self.queue.put((inputs, done, request))
        return done.result()

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
            self._run(batch)

    def _run(self, batch):
        estimate = sum(_rows(item[0]) for item in batch) * self.seconds_per_row
        live = []
        for item in batch:
            try:
                item[2].check(estimate)
                live.append(item)
            except RequestCancelled as error:
                item[1].set_exception(error)
        if not live:
            return
        start = time.monotonic()
        try:
            keys = live[0][0].keys()
            if len(live) == 1 or any(b[0].keys() != keys for b in live):
                for inputs, done, _ in live:
                    done.set_result(self.run(inputs))
                return
            sizes = [_rows(inputs) for inputs, _, _ in live]
            joined = {k: np.concatenate([inputs[k] for inputs, _, _ in live]) for k in keys}
            outputs = self.run(joined)
            offsets = np.cumsum([0] + sizes)
            for i, (_, done, _) in enumerate(live):
                done.set_result({k: v[offsets[i] : offsets[i + 1]] for k, v in outputs.items()})
        except Exception as error:  # every waiting request learns of it
            for _, done, _ in live:
                if not done.done():
                    done.set_exception(error)
        finally:
            rows = sum(_rows(item[0]) for item in live)
            measured = (time.monotonic() - start) / rows
            self.seconds_per_row = (
                measured
                if not self.seconds_per_row
                else (0.8 * self.seconds_per_row + 0.2 * measured)
            )


class _Request:
    """What the batcher knows of a request's client."""

    def __init__(self, alive, time_left):
        self.alive = alive
        self.time_left = time_left

    def check(self, seconds):
        """Raises unless the client still waits, and would for `seconds` more."""
        left = self.time_left()
        if left is not None and left <= seconds:
            raise DeadlineExceeded(
                f"The request's deadline leaves {max(left, 0.0):.3f} s, and its work takes "
                f"about {seconds:.3f} s"
            )
        if not self.alive():
            raise RequestCancelled("The client cancelled the request")


def _rows(inputs):
    return len(next(iter(inputs.values())))
