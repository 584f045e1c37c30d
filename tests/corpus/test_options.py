"""`CorpusOptions`: what each engine's workers get."""

import pytest

from keras_transformer.corpus.options import CorpusOptions

REQUIRED = {"model": "exports/demo", "input": "corpus/*.en", "output": "out/job"}


@pytest.mark.parametrize(
    "engine, worker_threads, threads",
    [("local", None, None), ("ray", None, 1), ("beam", None, 1), ("local", 2, 2), ("ray", 2, 2)],
)
def test_each_worker_is_one_cpu_on_the_distributed_engines(engine, worker_threads, threads):
    # One process alone uses every core; workers of a distributed engine
    # each hold one CPU (Ray schedules its holders so), unless told.
    options = CorpusOptions(**REQUIRED, engine=engine, worker_threads=worker_threads)
    assert options.threads == threads


@pytest.mark.parametrize("worker_threads", [0, -1])
def test_bad_worker_threads_are_named(worker_threads):
    with pytest.raises(ValueError, match="worker_threads"):
        CorpusOptions(**REQUIRED, worker_threads=worker_threads)


@pytest.mark.parametrize(
    "shards, match",
    [
        (0, "`shards` must be a positive int"),
        (True, "`shards` must be a positive int"),
        # Six-digit names would hide the shards from read_shards and from
        # the check that a job never writes over another's output.
        (100_000, "`shards` must be at most 99999 .*five digits.*Received: shards=100000"),
    ],
)
def test_bad_shard_counts_are_named(shards, match):
    with pytest.raises(ValueError, match=match):
        CorpusOptions(**REQUIRED, shards=shards)
    assert CorpusOptions(**REQUIRED, shards=99_999).shards == 99_999
