"""The private tensorflow-text names the tokenizer relies on."""

import pytest
import tensorflow_text as tf_text

from keras_transformer.data import SubwordTokenizer, tf_text_adapter
from keras_transformer.data.synthetic import generate_pairs


def test_tensorflow_text_still_has_what_the_tokenizer_needs():
    # Fails loudly when a tensorflow-text release moves either name.
    assert tf_text_adapter._gen_ops is not None
    assert hasattr(tf_text_adapter._gen_ops, "sentencepiece_op")
    tokenizer = SubwordTokenizer.train([de for _, de in generate_pairs(500, seed=1)], 100)
    plain = tf_text.SentencepieceTokenizer(model=tokenizer.model_proto)
    assert hasattr(plain, "_model_resource")


def test_a_moved_attribute_is_named():
    with pytest.raises(RuntimeError, match="tf_text_adapter.py"):
        tf_text_adapter.set_model_resource(object(), None)


def test_a_moved_op_is_named(monkeypatch):
    monkeypatch.setattr(tf_text_adapter, "_gen_ops", None)
    with pytest.raises(RuntimeError, match="sentencepiece_op"):
        tf_text_adapter.sentencepiece_op(b"", "x")
