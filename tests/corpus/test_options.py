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
