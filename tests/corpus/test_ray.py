"""`--engine ray` on a real two-node Ray cluster on loopback."""

import os
import re
import secrets
import signal
import time

import pytest

from keras_transformer.corpus.job import ray_dataset
from keras_transformer.corpus.options import CorpusOptions
from keras_transformer.corpus.records import read_shards
from keras_transformer.runtime.local import translate_with_savedmodel
from tests.corpus.cluster import loopback_cluster
from tests.processes import run_python

pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head node and one more, each of one CPU; stopped whatever happens.
    Their home holds a saved Ray token, as any local ray.init() of Ray 2.60
    leaves one: the head then asked the second node for it, and refused it."""
    home = tmp_path_factory.mktemp("home")
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text(secrets.token_hex(32))
    with loopback_cluster(nodes=2, cpus=1, home=str(home)) as head:
        yield head


SOURCES = [
    f"The {w} sees the {v}."
    for w in ("dog", "cat", "girl", "man", "woman", "child")
    for v in ("bird", "book", "garden")
] + ["", "A tired teacher gives the red book."]


@pytest.mark.parametrize("max_batch_size", [1, 4, 64])
def test_ray_is_given_whole_batches_sorted_by_length_longest_first(monkeypatch, max_batch_size):
    import json
    import random

    import ray

    given = {}

    class Dataset:  # what the job asks of Ray's dataset, recorded
        def map_batches(self, fn, **kwargs):
            given["batch_size"] = kwargs["batch_size"]
            return self

    def from_items(items):
        given["items"] = items
        return Dataset()

    monkeypatch.setattr(ray.data, "from_items", from_items)
    rng = random.Random(max_batch_size)
    records = [{"file": "in.en", "line": i, "source": "w é " * rng.randrange(40)}
               for i in range(50)]  # fmt: skip
    options = CorpusOptions(model="m", input="in.en", output="out", engine="ray",
                            max_batch_size=max_batch_size)  # fmt: skip
    ray_dataset(records, options)
    assert given["batch_size"] == 1  # a call takes one of the batches cut here
    batches = [json.loads(item["records"]) for item in given["items"]]
    assert [len(b) for b in batches] == [max_batch_size] * (50 // max_batch_size) + (
        [50 % max_batch_size] if 50 % max_batch_size else []
    )
    ordered = [record for batch in batches for record in batch]
    assert sorted(ordered, key=lambda r: r["line"]) == records  # each record once, intact
    lengths = [len(r["source"]) for r in ordered]
    assert lengths == sorted(lengths, reverse=True)  # the holders end on short batches


def test_the_job_runs_on_both_nodes_and_equals_one_process(export_base, cluster, tmp_path):
    (tmp_path / "in.en").write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    result = run_python(
        "-m", "keras_transformer.cli", "corpus", "--model", export_base,
        "--input", str(tmp_path / "*.en"), "--output", str(tmp_path / "out"),
        "--engine", "ray", "--ray-address", cluster, "--workers", "2",
        "--max-batch-size", "2", "--shards", "2", timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    workers = dict(re.findall(r"(\w+): (\d+)", result.stderr.rsplit("rows by worker:", 1)[1]))
    assert len(workers) == 2 and sum(map(int, workers.values())) == len(SOURCES), workers
    records = read_shards(str(tmp_path / "out"))
    assert [r["line"] for r in records] == list(range(len(SOURCES)))
    assert [r["translation"] for r in records] == translate_with_savedmodel(export_base, SOURCES)


def test_a_worker_killed_mid_job_is_retried_with_no_duplicate(export_base, cluster, tmp_path):
    import psutil

    from tests.processes import start_python

    sources = [f"{s} ({i})" for i in range(6) for s in SOURCES[:18]]  # 108 lines
    (tmp_path / "in.en").write_text("\n".join(sources) + "\n", encoding="utf-8")
    job = start_python(
        "-m", "keras_transformer.cli", "corpus", "--model", export_base,
        "--input", str(tmp_path / "*.en"), "--output", str(tmp_path / "out"),
        "--engine", "ray", "--ray-address", cluster, "--workers", "2", "--max-batch-size", "1",
    )  # fmt: skip
    killed = None
    deadline = time.monotonic() + 300
    while killed is None and job.poll() is None and time.monotonic() < deadline:
        # A holder's process title names the method it runs: kill one
        # that has loaded its model and answers lines.
        working = [p for p in psutil.process_iter(["cmdline"])
                   if "MapBatches(_ModelHolder)" in " ".join(p.info["cmdline"] or ())
                   and "__init__" not in " ".join(p.info["cmdline"])]  # fmt: skip
        if working and not list(tmp_path.glob("out*.jsonl")):
            time.sleep(1.0)
            try:
                os.kill(working[0].pid, signal.SIGKILL)
                killed = working[0].pid
            except ProcessLookupError:  # gone meanwhile: find another
                pass
        time.sleep(0.2)
    output = job.communicate(timeout=600)[0]
    assert killed is not None, output[-3000:]
    assert job.returncode == 0, output[-3000:]
    records = read_shards(str(tmp_path / "out"))
    assert [r["line"] for r in records] == list(range(len(sources)))  # each line once
    assert [r["source"] for r in records] == sources
