"""Validation BLEU as a Keras metric, for tuning objectives."""

import keras

from keras_transformer.decoding.evaluation import score_translations
from keras_transformer.decoding.translator import Translator


class BleuCallback(keras.callbacks.Callback):
    """Decodes validation sources at each epoch end and logs sacreBLEU.

    The score goes into the epoch logs as `name` (default `val_bleu`), so
    keras-tuner can use `keras_tuner.Objective("val_bleu", "max")`.

    Args:
        sources, references: validation sentences (lists of str).
        source_tokenizer, target_tokenizer: the `SubwordTokenizer`s.
        beam_size: 1 decodes greedily (fast); more uses beam search.
        max_length: longest translation, in tokens.
        batch_size: sentences per decoding batch.
        name: the log key.
    """

    def __init__(
        self,
        sources,
        references,
        source_tokenizer,
        target_tokenizer,
        beam_size=1,
        max_length=64,
        batch_size=64,
        name="val_bleu",
    ):
        super().__init__()
        if len(sources) != len(references) or not sources:
            raise ValueError(
                "BLEU needs aligned, non-empty sources and references; "
                f"got {len(sources)} and {len(references)}"
            )
        self.sources = list(sources)
        self.references = list(references)
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.beam_size = beam_size
        self.max_length = max_length
        self.batch_size = batch_size
        self.name = name

    def on_epoch_end(self, epoch, logs=None):
        translator = Translator(
            self.model,
            self.source_tokenizer,
            self.target_tokenizer,
            beam_size=self.beam_size,
            max_output_length=self.max_length,
        )
        hypotheses = translator.translate_batches(self.sources, batch_size=self.batch_size)
        score = score_translations(hypotheses, self.references)
        if logs is not None:
            logs[self.name] = score.bleu
