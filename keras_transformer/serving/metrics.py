"""Request counts and latency histograms in Prometheus' text format.

The names and labels follow TF Serving's `/monitoring/prometheus/metrics`
(`:tensorflow:serving:request_count`, `..._request_latency`), with the
version, signature and API as extra labels. Label values are the caller's
to bound: the server passes only names it serves, and `UNKNOWN` for any
other (`core.Models.predict`), so that clients cannot grow the metrics.
"""

import bisect
import collections
import threading

# Seconds; TF Serving's latency buckets are exponential in microseconds.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# The one label value of every name a client sent that the server does not serve.
UNKNOWN = "<unknown>"


def _escape(value):
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**values):
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in values.items()) + "}"


class Metrics:
    """Counts requests and their latencies by model, version, signature,
    API and status code."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()
        self.histograms = {}  # key -> [bucket counts..., total count, sum]

    def observe(self, model, version, signature, api, code, seconds):
        version = "" if version is None else str(version)
        with self.lock:
            self.counts[(model, version, signature, api, code)] += 1
            key = (model, version, signature, api)
            histogram = self.histograms.setdefault(key, [0] * (len(BUCKETS) + 2) + [0.0])
            histogram[bisect.bisect_left(BUCKETS, seconds)] += 1
            histogram[-2] += 1
            histogram[-1] += seconds

    def render(self):
        """The metrics in Prometheus' text exposition format."""
        lines = [
            "# TYPE :tensorflow:serving:request_count counter",
        ]
        # Copied under the lock that requests take, formatted outside it.
        with self.lock:
            counts = dict(self.counts)
            histograms = {key: list(value) for key, value in self.histograms.items()}
        for (model, version, signature, api, code), n in sorted(counts.items()):
            labels = _labels(model_name=model, version=version, signature=signature,
                             api=api, status=code)  # fmt: skip
            lines.append(f":tensorflow:serving:request_count{labels} {n}")
        lines.append("# TYPE :tensorflow:serving:request_latency histogram")
        for (model, version, signature, api), histogram in sorted(histograms.items()):
            base = dict(model_name=model, version=version, signature=signature, api=api)
            cumulative = 0
            for bound, count in zip(BUCKETS + (float("inf"),), histogram[: len(BUCKETS) + 1]):
                cumulative += count
                le = "+Inf" if bound == float("inf") else repr(bound)
                lines.append(
                    f":tensorflow:serving:request_latency_bucket{_labels(**base, le=le)} "
                    f"{cumulative}"
                )
            lines.append(
                f":tensorflow:serving:request_latency_sum{_labels(**base)} {histogram[-1]}"
            )
            lines.append(
                f":tensorflow:serving:request_latency_count{_labels(**base)} {histogram[-2]}"
            )
        return "\n".join(lines) + "\n"
