"""The connections whose clients cancel most of their calls, and how long
their next calls wait before any work.

A client that cancels its calls a few milliseconds after sending them (a
flood, or a client whose own timeout is shorter than any answer) costs the
server a pool thread, the read of its request and the model's work for every
call still live when a batch forms, and the batch runs to its end whether or
not anyone still waits for it. A well-behaved client cancels a call now and
then (a user gave up, a hedged request was answered elsewhere, a
translate-as-you-type box sent a newer text), not nearly all of them.

So the gRPC server keeps, for each connection (gRPC's peer address), an
exponentially weighted share of its calls that its client cancelled (a
plain average over its first eight), and how long those lived in the
server. From its fourth call, while that share is at least `share`,
the connection's next calls wait, before a thread or the model takes them,
for about twice as long as its calls usually lived (between `min_hold` and
`max_hold`): a call whose client cancels it meanwhile is never worked on; one
still wanted then runs as any other. A connection whose calls are answered
again is soon held no more.
"""

import collections
import threading

from keras_transformer._validation import check_positive_int

# How much one call moves its connection's record (an exponentially
# weighted average): the last eight or so calls count. A connection's first
# calls are averaged plainly (the n-th weighs 1/n until 1/n falls to WEIGHT),
# so that a new connection's record says what its few calls did: from a
# share of 0, a flood's connection took 11 calls to be held, and a flood
# that opens a new connection every ten calls was never held.
WEIGHT = 1 / 8
# Calls a connection makes before its record can hold it.
MIN_CALLS = 4


class CancellingClients:
    """The record of calls cancelled by their clients, by connection.

    Args:
        share: the share of its calls that a connection's client cancelled
            from which its next calls are held (above 0, at most 1).
        min_hold: the shortest hold, in seconds: time for a client's cancel
            to reach the server.
        max_hold: the longest hold, in seconds.
        max_connections: connections remembered; the one seen least
            recently is forgotten first.

    Example:

    >>> clients = CancellingClients(min_hold=0.05, max_hold=0.25)
    >>> for _ in range(12):
    ...     clients.record(b"ipv4:127.0.0.1:5000", cancelled=True, lived=0.1)
    >>> clients.hold(b"ipv4:127.0.0.1:5000")
    0.2
    >>> clients.hold(b"ipv4:127.0.0.1:6000")
    0.0
    """

    def __init__(self, share=0.75, min_hold=0.05, max_hold=0.25, max_connections=4096):
        if not 0 < share <= 1:
            raise ValueError(f"`share` must be above 0 and at most 1. Received: share={share!r}")
        if not 0 <= min_hold <= max_hold:
            raise ValueError(
                "`min_hold` and `max_hold` must be seconds with 0 <= min_hold <= max_hold. "
                f"Received: min_hold={min_hold!r}, max_hold={max_hold!r}"
            )
        check_positive_int("max_connections", max_connections)
        self.share = share
        self.min_hold = min_hold
        self.max_hold = max_hold
        self.max_connections = max_connections
        self.lock = threading.Lock()
        # peer -> (share of its calls cancelled, seconds its cancelled calls
        # lived), each an `_Average`
        self.records = collections.OrderedDict()

    def hold(self, peer):
        """Seconds the next call of `peer` waits before any work: 0 unless
        its client cancelled most of its recent calls."""
        with self.lock:
            cancelled, lived = self.records.get(peer, (None, None))
            if cancelled is None or cancelled.count < MIN_CALLS or cancelled.value < self.share:
                return 0.0
            return min(self.max_hold, max(self.min_hold, 2 * lived.value))

    def record(self, peer, cancelled, lived):
        """Counts a call of `peer` that ended: whether its client cancelled
        it, and `lived`, the seconds from its arrival to its end."""
        with self.lock:
            record = self.records.pop(peer, None) or (_Average(), _Average())
            record[0].add(float(cancelled))
            if cancelled:
                record[1].add(lived)
            self.records[peer] = record  # the one seen most recently last
            while len(self.records) > self.max_connections:
                self.records.popitem(last=False)

    def __len__(self):
        with self.lock:
            return len(self.records)


class _Average:
    """The plain mean of the first values, then an exponentially weighted
    average moving by `WEIGHT` a value (from the `1/WEIGHT`-th on)."""

    __slots__ = ("value", "count")

    def __init__(self):
        self.value, self.count = 0.0, 0

    def add(self, value):
        self.count += 1
        self.value += max(WEIGHT, 1 / self.count) * (value - self.value)
