"""Batching of concurrent requests, with large ones split to fill batches fairly."""

import collections
import logging
import queue
import threading
import time
from concurrent import futures

import numpy as np

log = logging.getLogger("keras_transformer.serve")

# How often a waiting request (for its batch, or for a work slot in `core`)
# asks whether its client is still there.
POLL_SECONDS = 0.05
# How long, at least, small clients just answered count as still there.
_SMALL_RETURN_SECONDS = 0.05
# How long the batcher idles, with a yielding request waiting, before its
# first row: the server's intake, below the model's priority, reads the
# cancels of a flood while the model is idle.
YIELD_GRACE_SECONDS = 0.05
# The longest a yielding request waits for its next row while others keep
# the batcher busy: then that row runs, in a batch of its own.
YIELD_AT_MOST_SECONDS = 1.0


class RequestCancelled(Exception):
    """The client cancelled the request."""


class DeadlineExceeded(RequestCancelled):
    """The request's deadline passed before its work was done."""


class Batcher:
    """Runs the requests of one signature in batches of at most
    `max_batch_size` rows.

    A batch waits at most `timeout` seconds for company. Requests of at
    most a batch are taken whole, in arrival order. A larger one is split,
    as TF Serving's large-batch splitting does, but each request gets an
    equal share of a batch's work, as a fair queue gives each client its
    share: beside small requests, a large one takes as many rows as the
    largest of them, and what is left of it goes behind whatever arrived
    meanwhile. Large requests fill batches only once no small request has
    been seen for a batch's time. On a CPU a batch's time grows with its
    rows, so one client's 400-sentence request slows the one-sentence
    clients beside it as one more client would, not as 400; and alone it
    runs in full batches. The oldest request waiting always gets its share,
    so a large one advances whatever the small ones do. With `split=False`
    a request over `max_batch_size` is refused.

    As in TF Serving, nothing is refused on a guess of how long it would
    take: before each batch is formed, each request is asked whether its
    client is still there (`alive()`) and its deadline has not passed
    (`time_left()`); one that fails either stops consuming work. A run that
    raises fails the requests of its batch alone: the batcher goes on.

    A `yielding` request (the server marks so the calls of a connection that
    cancels most of its calls) runs only when no other request waits, one
    row a batch, and is asked again before each row whether its client is
    still there: a client that cancels it meanwhile costs the others at most
    one row's run, and a request still wanted is answered once the others
    are. Its first row waits until it and the batcher have both waited
    `YIELD_GRACE_SECONDS` with nothing to run, so that a cancel already
    sent is read first. Others cannot starve it: after
    `YIELD_AT_MOST_SECONDS` its next row runs, in a batch of its own.

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
        # Until when large requests leave room for the small requests whose
        # answers just went out (their clients' next requests are on the way).
        self._small_until = 0.0
        # When the batcher's last run ended.
        self._worked = float("-inf")
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def submit(self, inputs, alive=lambda: True, time_left=lambda: None, yielding=False):
        """Runs `inputs` (rows first, at least one row); returns the outputs.

        `alive()` is False once the client cancelled; `time_left()` is the
        seconds to the request's deadline, or None without one. A
        `yielding` request runs one row at a time, when no other waits.

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
        task = _Task(inputs, _Request(alive, time_left), yielding)
        task.request.check()
        self.queue.put(task)
        # Waits in short steps, and not past the deadline, so that a client
        # who leaves frees its server thread at once; the loop then drops
        # the rest of its rows.
        while True:
            left = time_left()
            wait = POLL_SECONDS if left is None else min(POLL_SECONDS, max(left, 0.0))
            try:
                return task.done.result(timeout=wait)
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
            try:
                while True:
                    # A request whose client left waits for no one: else a
                    # yielding one's grace would be counted from its arrival.
                    self._drop_gone(pending)
                    if not pending:
                        break
                    waiting_rows = sum(t.remaining for t in pending if not t.yielding)
                    full = waiting_rows >= self.max_batch_size
                    until = deadline
                    if all(t.yielding for t in pending) and pending[0].next == 0:
                        # with no row run yet, `waiting` is since it came
                        until = max(deadline, max(self._worked, pending[0].waiting)
                                    + YIELD_GRACE_SECONDS)  # fmt: skip
                    try:
                        if full:
                            item = self.queue.get_nowait()
                        else:
                            item = self.queue.get(timeout=max(0.0, until - time.monotonic()))
                    except queue.Empty:
                        break
                    if item is None:
                        stopping = True
                        break
                    pending.append(item)
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

        The requests that do not yield share it (`_share`); with none
        waiting, or once it waited `YIELD_AT_MOST_SECONDS` for its row, the
        oldest yielding request gives one row, then goes behind the other
        yielding ones.
        """
        ready = collections.deque(t for t in pending if not t.yielding)
        yielding = [t for t in pending if t.yielding]
        now = time.monotonic()
        if ready and not (yielding and now - yielding[0].waiting >= YIELD_AT_MOST_SECONDS):
            pieces = self._share(ready)
        else:
            task = yielding.pop(0)
            pieces = [(task, task.next, task.next + 1)]
            task.next += 1
            task.waiting = now
            if task.remaining:
                yielding.append(task)
        pending.clear()
        pending.extend(ready)
        pending.extend(yielding)
        return pieces

    def _share(self, pending):
        """The rows of the next batch among `pending`, none yielding.

        Each request gets an equal share of the batch's work, as a fair
        queue gives each flow its share: small requests (at most a batch)
        go whole, in arrival order, and a large one takes as many rows as
        the largest small request waiting. Large requests fill the batch
        only once no small request has waited for a while, so a client
        whose answer is on its way back does not find a whole batch of
        them ahead of its next request. The oldest request waiting always
        goes first, so a large one advances whatever the small ones do.
        """
        room = self.max_batch_size
        small = [t for t in pending if t.rows <= self.max_batch_size]
        share = max([1] + [t.remaining for t in small])
        fill = not small and time.monotonic() >= self._small_until
        taken = {}
        oldest = pending[0]
        if oldest.rows > self.max_batch_size:
            taken[oldest] = min(oldest.remaining, share, room)
            room -= taken[oldest]
        for task in small:  # whole, in arrival order
            if task.remaining <= room:
                taken[task] = task.remaining
                room -= task.remaining
        for task in pending:  # a share each, then all that is left
            if room == 0:
                break
            if task.rows > self.max_batch_size and task not in taken:
                taken[task] = min(task.remaining, share, room)
                room -= taken[task]
        if fill:  # all are large: what is left goes to them, oldest first
            for task in pending:
                if room == 0:
                    break
                extra = min(task.remaining - taken[task], room)
                taken[task] += extra
                room -= extra
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
        start = time.monotonic()
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
        now = self._worked = time.monotonic()
        if any(task.rows <= self.max_batch_size and not task.yielding for task, _, _ in pieces):
            self._small_until = now + max(_SMALL_RETURN_SECONDS, now - start)
        for (task, _, end), output in zip(pieces, outputs):
            task.parts.append(output)
            if end == task.rows:
                task.finish()


class _Task:
    """A request in the batcher: its rows, how far it got, its outputs."""

    def __init__(self, inputs, request, yielding=False):
        self.inputs = inputs
        self.request = request
        self.yielding = yielding
        self.waiting = time.monotonic()  # since it came, then since its last row
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
