"""`Models`, what both front ends call: each failure a TF Serving status
code, the version released whatever happens, the metrics bounded to what
is served, and managers stopped once no longer served."""

import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.runtime.session_model import SignatureNotFound
from keras_transformer.serving.batching import DeadlineExceeded, RequestCancelled
from keras_transformer.serving.core import Models, ServingError, WorkSlot
from keras_transformer.serving.metrics import UNKNOWN
from tests.serving.conftest import string_signature


class _Session:
    """The part of `SessionModel` a version serves through."""

    def __init__(self):
        self.signatures = {
            "serving_default": string_signature("text", outputs=("translation", "score")),
            "score": string_signature("text", "translation", outputs=("score",)),
        }

    def signature(self, name):
        if name not in self.signatures:
            raise SignatureNotFound(f"No signature {name!r}")
        return self.signatures[name]


class _Version:
    def __init__(self, number, fail=None):
        self.number, self.fail = number, fail
        self.model = _Session()
        self.held = 0
        self.calls = []
        self.yielding = []

    def run(self, signature, arrays, alive, time_left, yielding):
        self.calls.append((signature, {k: v.tolist() for k, v in arrays.items()}))
        self.yielding.append(yielding)
        if self.fail is not None:
            raise self.fail
        rows = len(next(iter(arrays.values())))
        return {"translation": np.array([b"t"] * rows, object), "score": np.zeros(rows)}

    def release(self):
        self.held -= 1


class _Manager:
    def __init__(self, versions, labels=None):
        self.versions, self.labels = versions, labels or {}
        self.stopped = False

    def get(self, number=None):
        number = max(self.versions) if number is None else number
        if number not in self.versions:
            raise LookupError(f"Version {number} is not available")
        version = self.versions[number]
        version.held += 1
        return version

    def version_for_label(self, label):
        if label not in self.labels:
            raise ValueError(f"No version has the label {label!r}")
        return self.labels[label]

    def statuses(self):
        return {n: ("AVAILABLE", "") for n in self.versions}

    def stop(self):
        self.stopped = True


@pytest.fixture()
def served():
    versions = {1: _Version(1), 2: _Version(2)}
    models = Models()
    models.replace({"translator": _Manager(versions, labels={"stable": 1})})
    return models, versions


def test_a_request_runs_on_the_version_asked_for(served):
    models, versions = served
    for version, label, want in ((None, None, 2), (1, None, 1), (None, "stable", 1)):
        number, signature, outputs = models.predict(
            "translator", {"text": [b"a", b"b"]}, version=version, label=label
        )
        assert (number, signature) == (want, "serving_default")
        assert outputs["translation"].tolist() == [b"t", b"t"]
    assert versions[1].calls[-1] == ("serving_default", {"text": [b"a", b"b"]})
    assert all(v.held == 0 for v in versions.values())


@pytest.mark.parametrize("yielding", [False, True])
def test_whether_a_request_yields_reaches_the_version(served, yielding):
    models, versions = served
    models.predict("translator", {"text": [b"a"]}, yielding=yielding)
    assert versions[2].yielding == [yielding]


def test_the_output_filter_returns_only_what_it_names(served):
    models, _ = served
    _, _, outputs = models.predict("translator", {"text": [b"a"]}, output_filter=["score"])
    assert list(outputs) == ["score"]


@pytest.mark.parametrize(
    "request_kwargs,code",
    [
        (dict(name="nobody"), "NOT_FOUND"),
        (dict(version=7), "NOT_FOUND"),
        (dict(version=1, label="stable"), "INVALID_ARGUMENT"),
        (dict(label="canary"), "INVALID_ARGUMENT"),
        (dict(signature="translate_poems"), "NOT_FOUND"),
        (dict(output_filter=["poem"]), "INVALID_ARGUMENT"),
        (dict(inputs={"txt": [b"a"]}), "INVALID_ARGUMENT"),
        (dict(signature="score", inputs={"text": [b"a"], "translation": [b"b", b"c"]}),
         "INVALID_ARGUMENT"),
    ],
)  # fmt: skip
def test_a_bad_request_gets_the_status_tf_serving_gives_it(served, request_kwargs, code):
    models, versions = served
    request = {"name": "translator", "inputs": {"text": [b"a"]}, **request_kwargs}
    with pytest.raises(ServingError) as caught:
        models.predict(request.pop("name"), request.pop("inputs"), **request)
    assert caught.value.code == code
    assert all(v.held == 0 for v in versions.values())  # released on every path
    assert all(not v.calls for v in versions.values())  # nothing ran


@pytest.mark.parametrize(
    "error,code",
    [
        (DeadlineExceeded("too late"), "DEADLINE_EXCEEDED"),
        (RequestCancelled("gone"), "CANCELLED"),
        (ValueError("bad text"), "INVALID_ARGUMENT"),
        (tf.errors.InvalidArgumentError(None, None, "bad shape"), "INVALID_ARGUMENT"),
        (tf.errors.ResourceExhaustedError(None, None, "out of memory"), "RESOURCE_EXHAUSTED"),
        (tf.errors.InternalError(None, None, "broken"), "INTERNAL"),
    ],
)
def test_a_failed_run_gets_its_status_and_releases_the_version(error, code):
    version = _Version(1, fail=error)
    models = Models()
    models.replace({"translator": _Manager({1: version})})
    with pytest.raises(ServingError) as caught:
        models.predict("translator", {"text": [b"a"]})
    assert caught.value.code == code
    assert str(error.message if hasattr(error, "message") else error) in str(caught.value)
    assert version.held == 0


def test_the_metrics_name_only_what_is_served(served):
    models, _ = served
    models.predict("translator", {"text": [b"a"]})
    for kwargs in (dict(name="x" * 1000), dict(version=99), dict(signature="y" * 1000)):
        request = {"name": "translator", **kwargs}
        with pytest.raises(ServingError):
            models.predict(request.pop("name"), {"text": [b"a"]}, **request)
    assert set(models.metrics.counts) == {
        ("translator", "2", "serving_default", "grpc", "OK"),
        (UNKNOWN, "", "", "grpc", "NOT_FOUND"),
        ("translator", UNKNOWN, UNKNOWN, "grpc", "NOT_FOUND"),
        ("translator", "2", UNKNOWN, "grpc", "NOT_FOUND"),
    }


def test_replacing_stops_only_the_managers_no_longer_served():
    kept, dropped = _Manager({1: _Version(1)}), _Manager({1: _Version(1)})
    models = Models()
    models.replace({"kept": kept, "dropped": dropped})
    models.replace({"kept": kept})
    assert dropped.stopped and not kept.stopped
    with pytest.raises(ServingError, match="dropped"):
        models.acquire("dropped")
    models.stop()
    assert kept.stopped


def test_status_and_metadata(served):
    models, _ = served
    assert models.status("translator") == [(1, "AVAILABLE", ""), (2, "AVAILABLE", "")]
    assert models.status("translator", label="stable") == [(1, "AVAILABLE", "")]
    with pytest.raises(ServingError) as caught:
        models.status("translator", version=5)
    assert caught.value.code == "NOT_FOUND"
    number, signatures = models.metadata("translator", version=1)
    assert number == 1 and set(signatures) == {"serving_default", "score"}


def test_an_expired_request_is_answered_before_any_work_and_counted(served):
    models, versions = served
    with pytest.raises(ServingError) as caught:
        models.predict("translator", {"text": [b"a"]}, time_left=lambda: -0.001)
    assert caught.value.code == "DEADLINE_EXCEEDED"
    assert all(not v.calls for v in versions.values())  # nothing ran
    assert all(v.held == 0 for v in versions.values())
    assert models.metrics.counts[("translator", "2", "serving_default", "grpc",
                                  "DEADLINE_EXCEEDED")] == 1  # fmt: skip


@pytest.mark.parametrize(
    "alive,left,code",
    [(lambda: True, 0.15, "DEADLINE_EXCEEDED"), (lambda: False, None, "CANCELLED")],
)
def test_a_work_slot_is_waited_for_while_the_client_is_there_and_its_time_lasts(alive, left,
                                                                                 code):  # fmt: skip
    slots = threading.Semaphore(1)
    slots.acquire()  # every slot taken
    deadline = None if left is None else time.monotonic() + left
    start = time.monotonic()
    with pytest.raises(ServingError) as caught:
        with WorkSlot(slots, alive, lambda: deadline and deadline - time.monotonic(), "a slot"):
            pass
    assert caught.value.code == code
    if left is not None:  # gives up at its deadline, not a poll later
        assert left <= time.monotonic() - start < left + 0.04
    slots.release()
    with WorkSlot(slots, lambda: True, lambda: None, "a slot"):
        assert not slots.acquire(blocking=False)  # the slot is held inside
    assert slots.acquire(blocking=False)  # and given back after
