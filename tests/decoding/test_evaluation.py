import pytest
import sacrebleu

from keras_transformer.decoding import Scores, evaluate, score_translations

REFERENCES = ["Der Hund schläft.", "Eine Frau liest ein Buch im Garten.", "Zwei Kinder spielen."]
HYPOTHESES = ["Der Hund schläft.", "Eine Frau liest ein Buch.", "Zwei Kinder laufen."]


def test_scores_are_sacrebleu_corpus_scores():
    scores = score_translations(HYPOTHESES, REFERENCES)
    assert scores.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score)
    assert scores.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score)
    assert 0.0 < scores.bleu < 100.0 and scores.sentences == 3
    assert (
        scores.bleu_signature.startswith("nrefs:1|case:mixed")
        and "tok:13a" in scores.bleu_signature
    )
    assert f"{scores.bleu:.2f}" in scores.describe() and scores.as_dict()["chrf"] == scores.chrf


def test_ter_is_edits_over_reference_words():
    scores = score_translations(HYPOTHESES, REFERENCES)
    assert scores.ter == pytest.approx(sacrebleu.corpus_ter(HYPOTHESES, [REFERENCES]).score)
    # One substituted word of three: 33.3; a perfect match: 0.
    assert score_translations(["Zwei Kinder laufen."], ["Zwei Kinder spielen."]).ter == (
        pytest.approx(100 / 3)
    )
    assert score_translations(REFERENCES, REFERENCES).ter == 0.0
    assert scores.ter_signature.startswith("nrefs:1|case:lc") and "TER = " in scores.describe()


def test_perfect_and_empty_hypotheses():
    assert score_translations(REFERENCES, REFERENCES).bleu == pytest.approx(100.0)
    assert score_translations([""] * 3, REFERENCES).bleu == pytest.approx(0.0)


def test_misaligned_lists_are_refused():
    with pytest.raises(ValueError, match="2 hypotheses but 3 references"):
        score_translations(HYPOTHESES[:2], REFERENCES)


def test_nothing_to_score_is_named():
    # sacreBLEU's own error is an IndexError from inside it.
    with pytest.raises(ValueError, match="^Nothing to score: no sentence and no reference$"):
        score_translations([], [])


class _EchoTranslator:
    """Returns each source unchanged and records how it was called."""

    def translate_batches(self, sentences, batch_size=64, beam_size=None):
        self.called_with = (list(sentences), batch_size, beam_size)
        return list(sentences)


def test_evaluate_translates_then_scores():
    translator = _EchoTranslator()
    scores, hypotheses = evaluate(translator, REFERENCES, REFERENCES, batch_size=2, beam_size=5)
    assert isinstance(scores, Scores) and scores.bleu == pytest.approx(100.0)
    assert hypotheses == REFERENCES and translator.called_with == (REFERENCES, 2, 5)
    with pytest.raises(ValueError, match="3 source sentences but 2 references"):
        evaluate(translator, REFERENCES, REFERENCES[:2])
