"""Corpus BLEU, chrF and TER with sacreBLEU."""

import dataclasses

from keras_transformer._extras import require


@dataclasses.dataclass
class Scores:
    """sacreBLEU results with their signatures (TER: lower is better)."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    sentences: int
    ter: float | None = None
    ter_signature: str = ""

    def as_dict(self):
        return dataclasses.asdict(self)

    def describe(self):
        return (
            f"BLEU = {self.bleu:.2f}  ({self.bleu_signature})\n"
            f"chrF = {self.chrf:.2f}  ({self.chrf_signature})\n"
            + (f"TER = {self.ter:.2f}  ({self.ter_signature})\n" if self.ter is not None else "")
            + f"sentences = {self.sentences}"
        )


def score_translations(hypotheses, references):
    """sacreBLEU corpus BLEU, chrF and TER of `hypotheses` against `references`.

    Args:
        hypotheses: list of str.
        references: list of str, aligned with `hypotheses`.

    Returns:
        `Scores`.
    """
    sacrebleu = require("sacrebleu")

    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references: "
            "they must be aligned line by line"
        )
    if not references:
        raise ValueError("Nothing to score: no sentence and no reference")
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    ter = sacrebleu.metrics.TER()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    ter_score = ter.corpus_score(hypotheses, [references])
    return Scores(
        bleu=bleu_score.score,
        chrf=chrf_score.score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        sentences=len(hypotheses),
        ter=ter_score.score,
        ter_signature=str(ter.get_signature()),
    )


def evaluate(translator, sources, references, batch_size=64, beam_size=None):
    """Translates `sources` and scores them against `references`.

    Returns:
        `(Scores, hypotheses)`.
    """
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} source sentences but {len(references)} references")
    hypotheses = translator.translate_batches(sources, batch_size=batch_size, beam_size=beam_size)
    return score_translations(hypotheses, references), hypotheses
