"""`translate_with_savedmodel` and `score_with_savedmodel`: an export run
in this process, in batches."""

import pytest

from keras_transformer.runtime import local
from keras_transformer.runtime.session_model import SessionModel

SENTENCES = ["The dog sleeps.", "", "A young woman reads the book.", "The cat runs.", "x"]


@pytest.fixture
def runs(monkeypatch):
    """The rows of each call of the export."""
    rows = []
    run = SessionModel.run

    def counted(self, signature, inputs):
        rows.append(len(inputs["text"]))
        return run(self, signature, inputs)

    monkeypatch.setattr(SessionModel, "run", counted)
    return rows


def test_translations_in_batches_are_the_whole_s_in_order(export_base, runs):
    # N-best lines: every beam of every sentence must keep its place.
    signature = "translate_nbest"
    whole = local.translate_with_savedmodel(export_base, SENTENCES, signature=signature)
    assert runs == [5] and len(whole) == 5
    assert set(whole[1].split(" ||| ")) == {""}  # an empty line: empty translations
    runs.clear()
    batched = local.translate_with_savedmodel(
        export_base, SENTENCES, signature=signature, batch_size=2
    )
    assert runs == [2, 2, 1] and batched == whole


def test_scores_in_batches_are_the_whole_s(export_base, runs):
    targets = ["Der Hund schläft.", "", "Eine junge Frau liest.", "Die Katze.", "y"]
    whole = local.score_with_savedmodel(export_base, SENTENCES, targets)
    batched = local.score_with_savedmodel(export_base, SENTENCES, targets, batch_size=3)
    assert runs == [5, 3, 2]
    for a, b in zip(whole, batched):
        assert a.tolist() == pytest.approx(b.tolist(), abs=1e-5)


@pytest.mark.parametrize("batch_size", [0, -1])
def test_a_batch_size_below_one_is_refused(export_base, batch_size):
    # A negative one made `score` print nothing and succeed.
    with pytest.raises(ValueError, match="`batch_size` must be a positive int"):
        local.translate_with_savedmodel(export_base, SENTENCES, batch_size=batch_size)
    with pytest.raises(ValueError, match="`batch_size` must be a positive int"):
        local.score_with_savedmodel(export_base, SENTENCES, SENTENCES, batch_size=batch_size)
