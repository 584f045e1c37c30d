"""Batching of concurrent requests, with large ones split into fair pieces."""

import queue
import threading
import time
from concurrent import futures

import numpy as np

_NOTHING = object()


class RequestCancelled(Exception):
    """The client cancelled the request or its deadline passed."""


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
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def submit(self, inputs, alive=lambda: True):
        """Runs `inputs` (rows first); returns the outputs.

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
        if rows <= self.max_batch_size:
            return self._piece(inputs, alive)
        pieces = []
        for begin in range(0, rows, self.max_batch_size):
            piece = {k: v[begin : begin + self.max_batch_size] for k, v in inputs.items()}
            pieces.append(self._piece(piece, alive))
        return {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}

    def _piece(self, inputs, alive):
        if not alive():
            raise RequestCancelled("The request was cancelled or its deadline passed")
        done = futures.Future()
        self.queue.put((inputs, done, alive))
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
        live = []
        for item in batch:
            if item[2]():
                live.append(item)
            else:
                item[1].set_exception(RequestCancelled("The request was cancelled"))
        if not live:
            return
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


def _rows(inputs):
    return len(next(iter(inputs.values())))
