"""`Batcher`: batches, pieces, failures and clients who leave."""

import contextlib
import threading
import time

import numpy as np
import pytest

from keras_transformer.serving.batching import (
    YIELD_AT_MOST_SECONDS,
    YIELD_GRACE_SECONDS,
    Batcher,
    DeadlineExceeded,
    RequestCancelled,
)


def _double(inputs):
    return {"out": 2 * inputs["x"]}


@pytest.fixture
def batchers():
    made = []

    def make(run=_double, **kwargs):
        batcher = Batcher(run, **kwargs)
        made.append(batcher)
        return batcher

    yield make
    for batcher in made:
        batcher.stop()


@pytest.mark.parametrize("rows", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("max_batch_size", [1, 4])
def test_results_match_an_unbatched_run(batchers, rows, max_batch_size):
    seen = []

    def run(inputs):
        seen.append(len(inputs["x"]))
        return _double(inputs)

    batcher = batchers(run, max_batch_size=max_batch_size)
    x = np.arange(rows)
    np.testing.assert_array_equal(batcher.submit({"x": x})["out"], 2 * x)
    assert max(seen) <= max_batch_size and sum(seen) == rows


def test_concurrent_requests_share_a_batch_and_get_their_own_rows(batchers):
    sizes = []

    def run(inputs):
        sizes.append(len(inputs["x"]))
        return _double(inputs)

    batcher = batchers(run, max_batch_size=64, timeout=0.2)
    results = {}

    def send(i):
        results[i] = batcher.submit({"x": np.full(i + 1, i)})["out"]

    threads = [threading.Thread(target=send, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i in range(6):
        np.testing.assert_array_equal(results[i], np.full(i + 1, 2 * i))
    assert len(sizes) < 6  # some were batched together


def test_an_empty_request_is_refused_and_the_batcher_lives_on(batchers):
    batcher = batchers()
    with pytest.raises(ValueError, match="at least one row"):
        batcher.submit({"x": np.zeros([0])})
    assert batcher.submit({"x": np.arange(2)})["out"].tolist() == [0, 2]
    assert batcher.thread.is_alive()


@pytest.mark.parametrize("error", [ZeroDivisionError("boom"), KeyError("k"), MemoryError()])
def test_a_failing_batch_fails_its_requests_only(batchers, error):
    def run(inputs):
        if (inputs["x"] < 0).any():
            raise error
        return _double(inputs)

    batcher = batchers(run, max_batch_size=4)
    with pytest.raises(type(error)):
        batcher.submit({"x": np.array([-1])})
    for _ in range(3):
        assert batcher.submit({"x": np.array([3])})["out"].tolist() == [6]
    assert batcher.thread.is_alive()


def test_no_request_is_refused_for_a_guess_after_slow_batches(batchers):
    # Slow batches must not make a fast request with a short deadline be
    # refused up front: it runs, and is answered in time.
    def run(inputs):
        time.sleep(0.3 if inputs["x"][0] < 0 else 0.0)
        return _double(inputs)

    batcher = batchers(run, max_batch_size=1, timeout=0.0)
    for _ in range(3):
        batcher.submit({"x": np.array([-1])})
    deadline = time.monotonic() + 0.25
    result = batcher.submit({"x": np.array([5])}, time_left=lambda: deadline - time.monotonic())
    assert result["out"].tolist() == [10]


def test_an_expired_request_stops_between_pieces(batchers):
    ran = []

    def run(inputs):
        ran.append(len(inputs["x"]))
        time.sleep(0.05)
        return _double(inputs)

    batcher = batchers(run, max_batch_size=2, timeout=0.0)
    deadline = time.monotonic() + 0.12
    with pytest.raises(DeadlineExceeded):
        batcher.submit({"x": np.arange(40)}, time_left=lambda: deadline - time.monotonic())
    assert 0 < sum(ran) < 40


def test_a_client_who_leaves_while_queued_frees_its_thread_at_once(batchers):
    release = threading.Event()

    def run(inputs):
        release.wait(10)
        return _double(inputs)

    batcher = batchers(run, max_batch_size=1, timeout=0.0)
    busy = threading.Thread(target=batcher.submit, args=({"x": np.array([1])},))
    busy.start()
    time.sleep(0.1)  # the batcher is running the first request
    gone = threading.Event()
    threading.Timer(0.1, gone.set).start()
    start = time.monotonic()
    with pytest.raises(RequestCancelled):
        batcher.submit({"x": np.array([2])}, alive=lambda: not gone.is_set())
    assert time.monotonic() - start < 2.0  # not after the running batch
    release.set()
    busy.join()


def test_splitting_can_be_refused(batchers):
    batcher = batchers(max_batch_size=2, split=False)
    with pytest.raises(ValueError, match="--no-split-large-requests"):
        batcher.submit({"x": np.arange(3)})


def _recording(batches, started=None, seconds=0.02):
    """A run that records each batch's rows by sign: large requests send negatives."""

    def run(inputs):
        x = inputs["x"]
        batches.append((int((x < 0).sum()), int((x > 0).sum())))
        if started is not None:
            started.set()
        time.sleep(seconds)
        return _double(inputs)

    return run


def test_a_large_request_alone_runs_in_full_batches(batchers):
    batches = []
    batcher = batchers(_recording(batches, seconds=0.0), max_batch_size=8)
    out = batcher.submit({"x": -np.arange(1, 81)})
    np.testing.assert_array_equal(out["out"], -2 * np.arange(1, 81))
    assert batches == [(8, 0)] * 10


@pytest.mark.parametrize("small_rows", [1, 3])
def test_a_large_request_takes_a_small_ones_share_beside_them(batchers, small_rows):
    batches = []
    started = threading.Event()
    batcher = batchers(_recording(batches, started), max_batch_size=8, timeout=0.01)
    large = {}
    thread = threading.Thread(target=lambda: large.update(batcher.submit({"x": -np.arange(1, 81)})))
    thread.start()
    started.wait(5)
    smalls = [{} for _ in range(2)]
    rows = np.arange(1, small_rows + 1)
    clients = [
        threading.Thread(target=lambda out=out: out.update(batcher.submit({"x": rows})))
        for out in smalls
    ]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    assert thread.is_alive()  # the small requests did not wait for all of the large one
    for out in smalls:
        np.testing.assert_array_equal(out["out"], 2 * np.arange(1, small_rows + 1))
    thread.join()
    np.testing.assert_array_equal(large["out"], -2 * np.arange(1, 81))
    beside = [b for b in batches if b[1] > 0]
    # Beside small requests the large one has their share, never the room they leave.
    assert beside and all(large_rows == small_rows for large_rows, _ in beside)


def test_a_large_request_fills_again_once_small_clients_are_gone(batchers):
    batches = []
    started = threading.Event()
    batcher = batchers(_recording(batches, started), max_batch_size=8, timeout=0.01)
    thread = threading.Thread(target=lambda: batcher.submit({"x": -np.arange(1, 201)}))
    thread.start()
    started.wait(5)
    batcher.submit({"x": np.array([1])})
    thread.join()
    after = batches[batches.index(next(b for b in batches if b[1] > 0)) + 1 :]
    assert after[0][0] == 1  # the small client may be about to come back
    assert (8, 0) in after  # it did not: full batches again


@contextlib.contextmanager
def _flooded(batchers):
    """A batcher of 4-row batches of 5 ms each, kept full by four clients
    sending 4 rows each, over and again, until the block ends."""

    def run(inputs):
        time.sleep(0.005)
        return _double(inputs)

    batcher = batchers(run, max_batch_size=4, timeout=0.0)
    stop = threading.Event()

    def flood():
        while not stop.is_set():
            batcher.submit({"x": np.ones(4)})

    floods = [threading.Thread(target=flood) for _ in range(4)]
    for thread in floods:
        thread.start()
    try:
        yield batcher
    finally:
        stop.set()
        for thread in floods:
            thread.join()


def test_small_requests_cannot_starve_a_large_one(batchers):
    with _flooded(batchers) as batcher:
        start = time.monotonic()
        out = batcher.submit({"x": np.arange(40)})
        assert time.monotonic() - start < 10
        np.testing.assert_array_equal(out["out"], 2 * np.arange(40))


def test_a_yielding_request_waits_for_the_others_then_runs_a_row_a_batch(batchers):
    """Its rows (negative here) run once no other request waits, one a batch."""
    batches = []
    started, release = threading.Event(), threading.Event()

    def run(inputs):
        x = inputs["x"]
        batches.append((int((x < 0).sum()), int((x > 0).sum())))
        if x[0] == 100:  # the first batch keeps the batcher while the rest arrive
            started.set()
            release.wait(10)
        return _double(inputs)

    batcher = batchers(run, max_batch_size=8, timeout=0.0)
    results = {}

    def send(key, x, **kwargs):
        results[key] = batcher.submit({"x": np.array(x)}, **kwargs)["out"].tolist()

    threads = [threading.Thread(target=send, args=("first", [100]))]
    threads[0].start()
    assert started.wait(10)
    for key, x, kwargs in (("yielding", [-1, -2, -3], {"yielding": True}),
                           ("a", [1, 2], {}), ("b", [3, 4], {})):  # fmt: skip
        threads.append(threading.Thread(target=send, args=(key, x), kwargs=kwargs))
        threads[-1].start()
        time.sleep(0.05)
    release.set()
    for thread in threads:
        thread.join()
    assert results == {"first": [200], "yielding": [-2, -4, -6], "a": [2, 4], "b": [6, 8]}
    assert batches == [(0, 1), (0, 4), (1, 0), (1, 0), (1, 0)]


def test_a_request_that_arrives_between_a_yielding_ones_rows_goes_first(batchers):
    batches = []
    started = threading.Event()
    # a row's run is long enough for the other request to come during it
    batcher = batchers(_recording(batches, started, seconds=0.3), max_batch_size=8, timeout=0.0)
    out = {}
    thread = threading.Thread(
        target=lambda: out.update(batcher.submit({"x": -np.arange(1, 5)}, yielding=True))
    )
    thread.start()
    assert started.wait(10)
    assert batcher.submit({"x": np.array([7])})["out"].tolist() == [14]
    thread.join()
    assert out["out"].tolist() == [-2, -4, -6, -8]
    assert batches == [(1, 0), (0, 1), (1, 0), (1, 0), (1, 0)]


@pytest.mark.parametrize("rows", [2, 30])
def test_a_yielding_request_its_client_cancels_stops_after_one_row(batchers, rows):
    ran = []
    gone = threading.Event()

    def run(inputs):
        ran.append(len(inputs["x"]))
        gone.set()  # the client cancels while its first row runs
        return _double(inputs)

    batcher = batchers(run, max_batch_size=8, timeout=0.0)
    with pytest.raises(RequestCancelled):
        batcher.submit({"x": np.arange(rows)}, alive=lambda: not gone.is_set(), yielding=True)
    assert ran == [1]


def test_a_yielding_request_cancelled_while_the_batcher_idles_never_runs(batchers):
    """Its first row waits for the batcher to idle a while: a cancel sent
    meanwhile (gRPC may read it late) is seen before any work."""
    ran = []
    batcher = batchers(lambda inputs: ran.append(1) or _double(inputs), timeout=0.0)
    sent = time.monotonic()
    assert YIELD_GRACE_SECONDS >= 0.05
    with pytest.raises(RequestCancelled):  # cancelled 10 ms after it came
        batcher.submit(
            {"x": np.arange(3)}, alive=lambda: time.monotonic() - sent < 0.01, yielding=True
        )
    assert not ran
    start = time.monotonic()
    assert batcher.submit({"x": np.arange(2)}, yielding=True)["out"].tolist() == [0, 2]
    assert time.monotonic() - start >= 0.05


def test_a_yielding_request_is_not_starved_by_others(batchers):
    with _flooded(batchers) as batcher:
        # a row each YIELD_AT_MOST_SECONDS (1 s) at most: else DeadlineExceeded
        assert YIELD_AT_MOST_SECONDS <= 1.0
        deadline = time.monotonic() + 6.0
        out = batcher.submit(
            {"x": np.arange(3)}, time_left=lambda: deadline - time.monotonic(), yielding=True
        )
        np.testing.assert_array_equal(out["out"], 2 * np.arange(3))
