"""Batching of concurrent requests, with large ones split to fill batches fairly."""

import collections
import logging
import queue
import threading
import time
from concurrent import futures

import numpy as np

log = logging.getLogger("keras_transformer.serve")

# How often a waiting request asks whether its client is still there.
_POLL_SECONDS = 0.05


class RequestCancelled(Exception):
    """The client cancelled the request."""


class DeadlineExceeded(RequestCancelled):
    """The request's deadline passed before its work was done."""


class Batcher:
    """Runs the requests of one signature in batches of at most
    `max_batch_size` rows.

    A batch waits at most `timeout` seconds for company. Requests of at
    most a batch are taken whole, in arrival order. A larger one is split,
    as TF Serving's large-batch splitting fills the open batch with the
    first rows of a large task: while small requests wait, large ones share
    a quarter of each batch beside them, and when none wait they fill it;
    what is left of a large request goes behind whatever arrived meanwhile.
    Small requests thus never wait for all of a large one, nor share a
    batch mostly made of it, and a large one always advances: the oldest
    request waiting gets at least a quarter of each batch. With
    `split=False` a request over `max_batch_size` is refused.

    As in TF Serving, nothing is refused on a guess of how long it would
    take: before each batch is formed, each request is asked whether its
    client is still there (`alive()`) and its deadline has not passed
    (`time_left()`); one that fails either stops consuming work. A run that
    raises fails the requests of its batch alone: the batcher goes on.

    Args:
        run: `run(inputs) -> outputs`, dicts of arrays with rows first.
        max_batch_size: most rows in one run.
        timeout: seconds a batch waits for others to join it.
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
        self.queue = queue.Queue()  # arrivals, moved to `pending` by the loop
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
        task = _Task(inputs, _Request(alive, time_left))
        task.request.check()
        self.queue.put(task)
        # Waits in short steps, so that a client who leaves frees its server
        # thread at once; the loop then drops the rest of its rows.
        while True:
            try:
                return task.done.result(timeout=_POLL_SECONDS)
            except futures.TimeoutError:
                try:
                    task.request.check()
                except RequestCancelled as error:
                    task.gone = error
                    raise
                if not self.thread.is_alive() and not task.done.done():
                    raise RuntimeError("The batcher has stopped") from None

    def stop(self):
        self.queue.put(None)

    def _loop(self):
        pending = collections.deque()  # tasks with rows still to run, oldest first
        while True:
            if not pending:
                item = self.queue.get()
                if item is None:
                    return
                pending.append(item)
            # Takes in what arrived meanwhile, then waits for company until
            # the rows waiting fill a batch.
            deadline = time.monotonic() + self.timeout
            stopping = False
            while True:
                full = sum(t.remaining for t in pending) >= self.max_batch_size
                try:
                    if full:
                        item = self.queue.get_nowait()
                    else:
                        item = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                pending.append(item)
            try:
                self._drop_gone(pending)
                if pending:
                    self._run(self._pack(pending), pending)
            except BaseException as error:  # the loop outlives any one batch
                log.exception("A batch failed")
                for task in pending:
                    task.fail(error)
                pending.clear()
            if stopping:
                for task in pending:
                    task.fail(RuntimeError("The batcher has stopped"))
                return

    @staticmethod
    def _drop_gone(pending):
        for task in list(pending):
            try:
                if task.gone is not None:
                    raise task.gone
                task.request.check()
            except RequestCancelled as error:
                task.fail(error)
                pending.remove(task)

    def _pack(self, pending):
        """The rows of the next batch: `[(task, begin, end)]`.

        Small requests (at most a batch) go whole, in arrival order. Large
        ones share a quarter of the batch while small ones wait, and fill
        it when none do; the oldest request waiting always gets a quarter.
        """
        room = self.max_batch_size
        quarter = max(1, room // 4)
        taken = {}
        oldest = pending[0]
        if oldest.rows > room:
            taken[oldest] = min(oldest.remaining, quarter)
            room -= taken[oldest]
        for task in pending:  # small ones whole
            if task.rows <= self.max_batch_size and task.remaining <= room:
                taken[task] = task.remaining
                room -= task.remaining
        small_waiting = any(t.rows <= self.max_batch_size for t in pending)
        large_room = room
        if small_waiting:
            given = sum(n for t, n in taken.items() if t.rows > self.max_batch_size)
            large_room = min(room, max(0, quarter - given))
        for task in pending:  # large ones share what is left to them
            if large_room == 0:
                break
            if task.rows <= self.max_batch_size:
                continue
            extra = min(task.remaining - taken.get(task, 0), large_room)
            if extra > 0:
                taken[task] = taken.get(task, 0) + extra
                large_room -= extra
        pieces = []
        for task in pending:
            if task in taken:
                begin = task.next
                task.next += taken[task]
                pieces.append((task, begin, task.next))
        # Finished tasks leave; a split one goes behind the tasks that waited.
        split = [task for task, _, end in pieces if end < task.rows]
        for task, _, _ in pieces:
            pending.remove(task)
        pending.extend(split)
        return pieces

    def _run(self, pieces, pending):
        inputs = [{k: v[begin:end] for k, v in task.inputs.items()} for task, begin, end in pieces]
        keys = inputs[0].keys()
        try:
            if any(piece.keys() != keys for piece in inputs):
                outputs = [self.run(piece) for piece in inputs]
            else:
                joined = {k: np.concatenate([piece[k] for piece in inputs]) for k in keys}
                result = self.run(joined)
                offsets = np.cumsum([0] + [end - begin for _, begin, end in pieces])
                outputs = [
                    {k: v[offsets[i] : offsets[i + 1]] for k, v in result.items()}
                    for i in range(len(pieces))
                ]
        except Exception as error:  # every request of this batch learns of it
            for task, _, _ in pieces:
                task.fail(error)
                if task in pending:
                    pending.remove(task)
            return
        for (task, _, end), output in zip(pieces, outputs):
            task.parts.append(output)
            if end == task.rows:
                task.finish()


class _Task:
    """A request in the batcher: its rows, how far it got, its outputs."""

    def __init__(self, inputs, request):
        self.inputs = inputs
        self.request = request
        self.rows = _rows(inputs)
        self.next = 0  # the first row not yet taken into a batch
        self.parts = []  # outputs of the pieces run so far, in order
        self.done = futures.Future()
        self.gone = None  # set by the client's thread when it leaves

    @property
    def remaining(self):
        return self.rows - self.next

    def finish(self):
        if len(self.parts) == 1:
            self.done.set_result(self.parts[0])
        else:
            self.done.set_result(
                {k: np.concatenate([p[k] for p in self.parts]) for k in self.parts[0]}
            )

    def fail(self, error):
        if not self.done.done():
            self.done.set_exception(error)


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
