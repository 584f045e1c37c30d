"""`CorpusModel` and the batching every engine shares."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_transformer.corpus.model import CorpusModel, length_sorted_batches


@given(
    st.lists(st.text(max_size=12), max_size=60),
    st.integers(min_value=1, max_value=7),
    st.one_of(st.none(), st.integers(min_value=1, max_value=4)),
    st.booleans(),
)
def test_batches_hold_every_record_once_and_at_most_the_batch_size(
    sources, size, window, longest_first
):
    records = [{"source": s} for s in sources]
    batches = list(length_sorted_batches(records, size, window, longest_first))
    indexes = sorted(i for batch in batches for i, _ in batch)
    assert indexes == list(range(len(records)))
    assert all(0 < len(batch) <= size for batch in batches)
    for batch in batches:  # sorted by length within a batch
        lengths = [len(r["source"]) for _, r in batch]
        assert lengths == sorted(lengths, reverse=longest_first)
    if window is None:  # one window: sorted across the batches too
        lengths = [len(r["source"]) for batch in batches for _, r in batch]
        assert lengths == sorted(lengths, reverse=longest_first)


@pytest.mark.parametrize(
    "task,signature,match",
    [
        ("translate", "translate_poems", "has no signature 'translate_poems' for --task translate"),
        ("translate", "score", "does not answer \\['score', 'translation'\\]"),
        ("summarize", None, "`task` must be one of"),
    ],
)
def test_an_export_without_the_signature_asked_for_is_named(export_base, task, signature, match):
    with pytest.raises(ValueError, match=match):
        CorpusModel(export_base, task, signature)


@pytest.mark.parametrize("threads", [None, 1, 2])
def test_the_session_runs_with_the_threads_asked_for(export_base, threads):
    model = CorpusModel(export_base, "translate", threads=threads)
    try:
        config = model.session.config
        if threads is None:
            assert config is None
        else:
            pools = (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads)
            assert pools == (threads, threads)
        (result,) = model.run([{"source": "The dog sleeps."}])
        assert isinstance(result["translation"], str)
    finally:
        model.close()
