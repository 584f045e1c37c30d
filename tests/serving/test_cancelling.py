"""`CancellingClients`: which connections' calls are held, and how long."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_transformer.serving.cancelling import MIN_CALLS, WEIGHT, CancellingClients

PEER = b"ipv4:127.0.0.1:5000"


def _average(values):
    """The plain mean of the first 1/WEIGHT values, then an exponentially
    weighted average moving by WEIGHT a value; 0 for none."""
    first = round(1 / WEIGHT)
    if not values:
        return 0.0
    average = sum(values[:first]) / len(values[:first])
    for value in values[first:]:
        average = (1 - WEIGHT) * average + WEIGHT * value
    return average


def _reference(outcomes, share=0.75, min_hold=0.05, max_hold=0.25):
    """The hold after `outcomes` ([(cancelled, lived)]), from the formulas."""
    cancelled_share = _average([float(cancelled) for cancelled, _ in outcomes])
    lived = _average([seconds for cancelled, seconds in outcomes if cancelled])
    if len(outcomes) < MIN_CALLS or cancelled_share < share:
        return 0.0
    return min(max_hold, max(min_hold, 2 * lived))


@pytest.mark.parametrize(
    "pattern,held",
    [
        ("C" * 12, True),  # a flood: all cancelled
        ("A" * 12, False),  # answered
        ("CA" * 12, False),  # cancels half: never held
        ("CCCA" * 6, False),  # three in four, weighted to the last: not yet
        ("A" * 4 + "C" * 16, True),
        ("C" * 16 + "A" * 4, False),  # answered again: forgiven
        ("C" * 3, False),  # too few calls to judge
        ("C" * 4, True),  # a new connection's flood: held from its fifth call
        ("ACCC", True),  # three of its first four
        ("AACC", False),
        ("CCCCA", True),  # four of five
    ],
)
def test_a_connection_is_held_while_it_cancels_most_of_its_calls(pattern, held):
    clients = CancellingClients()
    for outcome in pattern:
        clients.record(PEER, cancelled=outcome == "C", lived=0.01)
    assert (clients.hold(PEER) > 0) == held
    assert clients.hold(b"ipv4:127.0.0.1:6000") == 0.0  # another connection


@pytest.mark.parametrize("lived,hold", [(0.0, 0.05), (0.01, 0.05), (0.05, 0.1), (0.1, 0.2),
                                        (0.2, 0.25), (30.0, 0.25)])  # fmt: skip
def test_the_hold_is_twice_as_long_as_the_calls_lived_within_its_bounds(lived, hold):
    clients = CancellingClients(min_hold=0.05, max_hold=0.25)
    for _ in range(20):
        clients.record(PEER, cancelled=True, lived=lived)
    assert clients.hold(PEER) == pytest.approx(hold)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.floats(0, 5, allow_nan=False)), max_size=40),
    st.floats(0.1, 1.0),
)
def test_the_hold_follows_the_weighted_averages(outcomes, share):
    clients = CancellingClients(share=share, min_hold=0.05, max_hold=0.25)
    for cancelled, lived in outcomes:
        clients.record(PEER, cancelled, lived)
    hold = clients.hold(PEER)
    assert hold == pytest.approx(_reference(outcomes, share), abs=1e-9)
    assert hold == 0.0 or 0.05 <= hold <= 0.25


def test_the_least_recently_seen_connections_are_forgotten():
    clients = CancellingClients(max_connections=3)
    peers = [f"ipv4:127.0.0.1:{5000 + i}".encode() for i in range(5)]
    for peer in peers[:3]:
        for _ in range(12):
            clients.record(peer, cancelled=True, lived=0.1)
    clients.record(peers[0], cancelled=True, lived=0.1)  # seen again: kept
    clients.record(peers[3], cancelled=False, lived=0.0)
    clients.record(peers[4], cancelled=False, lived=0.0)
    assert len(clients) == 3
    assert clients.hold(peers[0]) > 0
    assert clients.hold(peers[1]) == clients.hold(peers[2]) == 0.0  # forgotten


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"share": 0}, "share"),
        ({"share": 1.5}, "share"),
        ({"min_hold": -0.1}, "min_hold"),
        ({"min_hold": 0.5, "max_hold": 0.25}, "max_hold"),
        ({"max_connections": 0}, "max_connections"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CancellingClients(**kwargs)
