"""`Metrics`: Prometheus' text format, and a scrape that never waits on requests."""

import threading
import time

import pytest

from keras_transformer.serving.metrics import BUCKETS, UNKNOWN, Metrics


def test_counts_and_cumulative_buckets():
    metrics = Metrics()
    for seconds in (0.001, 0.02, 0.02, 100.0):
        metrics.observe("m", 1, "serving_default", "grpc", "OK", seconds)
    metrics.observe(UNKNOWN, None, "", "rest", "NOT_FOUND", 0.0)
    text = metrics.render()
    base = 'model_name="m",version="1",signature="serving_default",api="grpc"'
    assert f':tensorflow:serving:request_count{{{base},status="OK"}} 4' in text
    assert f'request_latency_bucket{{{base},le="0.005"}} 1' in text
    assert f'request_latency_bucket{{{base},le="0.025"}} 3' in text
    assert f'request_latency_bucket{{{base},le="60.0"}} 3' in text
    assert f'request_latency_bucket{{{base},le="+Inf"}} 4' in text
    assert f"request_latency_count{{{base}}} 4" in text
    assert 'model_name="<unknown>",version="",signature="",api="rest",status="NOT_FOUND"' in text
    assert len([line for line in text.splitlines() if "_bucket{" in line]) == 2 * (len(BUCKETS) + 1)


@pytest.mark.parametrize("value,escaped", [('a"b', 'a\\"b'), ("a\\b", "a\\\\b"), ("a\nb", "a\\nb")])
def test_label_values_are_escaped(value, escaped):
    metrics = Metrics()
    metrics.observe(value, 1, "s", "grpc", "OK", 0.1)
    lines = metrics.render().splitlines()
    line = next(line for line in lines if "request_count{" in line)
    assert line.startswith(f':tensorflow:serving:request_count{{model_name="{escaped}",')


def test_a_slow_scrape_does_not_hold_the_requests_lock(monkeypatch):
    metrics = Metrics()
    for i in range(50):
        metrics.observe("m", i, "s", "grpc", "OK", 0.1)
    from keras_transformer.serving import metrics as metrics_module

    formatting = threading.Event()
    real = metrics_module._labels

    def slow_labels(**values):
        formatting.set()
        time.sleep(0.01)
        return real(**values)

    monkeypatch.setattr(metrics_module, "_labels", slow_labels)
    scrape = threading.Thread(target=metrics.render)
    scrape.start()
    formatting.wait(5)
    start = time.monotonic()
    metrics.observe("m", 1, "s", "grpc", "OK", 0.1)  # a request finishing meanwhile
    assert time.monotonic() - start < 0.05
    assert scrape.is_alive()  # the scrape was still formatting
    scrape.join()
