import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data import END_ID, PAD_ID, START_ID, SubwordTokenizer
from keras_transformer.data.synthetic import generate_pairs

SENTENCES = [
    "Grüße aus Köln: 3,5 Äpfel für 12 € — sehr schön!",
    "Café, naïve façade; déjà vu? «Ja», sagte sie.",
    "Über 1.000 Mädchen (und 42 Jungen) laufen schnell...",
    "The year 2024 ended on Dec. 31st at 23:59!",
]


@pytest.fixture(scope="module")
def tokenizer():
    corpus = [de for _, de in generate_pairs(3000, seed=5)] + SENTENCES * 3
    return SubwordTokenizer.train(corpus, 400)


@pytest.mark.parametrize("sentence", SENTENCES)
def test_round_trip_is_exact(tokenizer, sentence):
    ids = tokenizer.tokenize(tf.constant([sentence]))
    assert int(tf.reduce_min(ids.flat_values)) > END_ID  # no special ids inside
    assert tokenizer.detokenize(ids).numpy()[0].decode("utf-8") == sentence


def test_detokenize_drops_specials_and_everything_after_end(tokenizer):
    ids = tokenizer.tokenize(tf.constant(["Der Hund schläft."])).to_tensor()
    framed = np.concatenate([[[START_ID]], ids.numpy(), [[END_ID, 17, 18, PAD_ID]]], axis=1)
    assert tokenizer.detokenize(framed).numpy()[0].decode() == "Der Hund schläft."


def test_reserved_ids(tokenizer):
    pieces = [p.decode() for p in tokenizer.id_to_piece(tf.range(4)).numpy()]
    assert pieces == ["<pad>", "<unk>", "<s>", "</s>"]


def test_save_and_load(tokenizer, tmp_path):
    path = str(tmp_path / "tok" / "target.model")
    tokenizer.save(path)
    restored = SubwordTokenizer.load(path)
    text = tf.constant(SENTENCES)
    np.testing.assert_array_equal(
        restored.tokenize(text).flat_values, tokenizer.tokenize(text).flat_values
    )
    assert (tmp_path / "tok" / "target.vocab").read_text(encoding="utf-8").splitlines()[3] == "</s>"


def test_lives_in_a_saved_model(tokenizer, tmp_path):
    module = tf.Module()
    module.tokenizer = tokenizer
    module.f = tf.function(
        lambda s: tokenizer.detokenize(tokenizer.tokenize(s)),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(tmp_path / "sm"))
    restored = tf.saved_model.load(str(tmp_path / "sm"))
    assert restored.f(tf.constant(SENTENCES[:1])).numpy()[0].decode() == SENTENCES[0]


def test_survives_clearing_tensorflow_state(tokenizer):
    import gc

    import keras

    # Both clear the eager kernel cache; keras-tuner clears between trials.
    tf.random.set_seed(7)
    keras.backend.clear_session()
    gc.collect()
    dataset = tf.data.Dataset.from_tensor_slices(SENTENCES).batch(2).map(tokenizer.tokenize)
    assert sum(1 for _ in dataset) == 2
    assert (
        tokenizer.detokenize(tokenizer.tokenize([SENTENCES[0]])).numpy()[0].decode() == SENTENCES[0]
    )


def test_invalid_vocab_size():
    with pytest.raises(ValueError, match="vocab_size"):
        SubwordTokenizer.train(["a b c"], 2)
    with pytest.raises(ValueError, match="no text"):
        SubwordTokenizer.train(["", "  "], 100)
