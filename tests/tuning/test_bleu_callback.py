import pytest

from keras_transformer.decoding import Translator, score_translations
from keras_transformer.tuning.bleu_callback import BleuCallback

SOURCES = ["The dog sleeps.", "A small cat sees the old man.", "The women run in the garden."]


@pytest.fixture(scope="module")
def parts(trained_model):
    return trained_model


@pytest.mark.parametrize("beam_size", [1, 2])
def test_logs_the_sacrebleu_of_the_models_translations(parts, beam_size):
    model, source, target = parts
    translations = Translator(
        model, source, target, beam_size=beam_size, max_output_length=20
    ).translate_batches(SOURCES)
    references = ["Der Hund schläft.", "Eine kleine Katze sieht den alten Mann.", translations[2]]
    callback = BleuCallback(
        SOURCES,
        references,
        source,
        target,
        beam_size=beam_size,
        max_length=20,
        batch_size=2,
        name="bleu",
    )
    callback.set_model(model)
    logs = {"loss": 1.0}
    callback.on_epoch_end(0, logs)
    assert logs["loss"] == 1.0
    assert logs["bleu"] == pytest.approx(score_translations(translations, references).bleu)


@pytest.mark.parametrize("sources,references", [([], []), (SOURCES, SOURCES[:2])])
def test_needs_aligned_non_empty_sentences(parts, sources, references):
    with pytest.raises(ValueError, match="aligned, non-empty"):
        BleuCallback(sources, references, parts[1], parts[2])
