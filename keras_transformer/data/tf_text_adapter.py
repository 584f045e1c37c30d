"""The two private tensorflow-text APIs the tokenizer needs, in one place.

`SubwordTokenizer` keeps its SentencePiece model in TensorFlow's resource
manager (see `tokenizer._SentencepieceResource`), which tensorflow-text
offers no public way to do: it needs the generated op that creates the
resource, and the tokenizer attribute that holds it. If a tensorflow-text
release moves either, these functions fail at once with a message that
says so, instead of a tokenizer that breaks later; tests/data cover both.
"""

import tensorflow_text as tf_text

try:
    from tensorflow_text.python.ops.sentencepiece_tokenizer import (
        gen_sentencepiece_tokenizer as _gen_ops,
    )
except ImportError:  # checked when used, with a message
    _gen_ops = None

_RESOURCE_ATTRIBUTE = "_model_resource"


def _changed(what):
    return RuntimeError(
        f"tensorflow-text {tf_text.__version__} no longer has {what}, which "
        "keras_transformer.data.tokenizer relies on; update "
        "keras_transformer/data/tf_text_adapter.py for this release"
    )


def sentencepiece_op(model, shared_name):
    """Creates the SentencePiece model resource under `shared_name`."""
    if _gen_ops is None or not hasattr(_gen_ops, "sentencepiece_op"):
        raise _changed("the generated op `sentencepiece_op`")
    return _gen_ops.sentencepiece_op(model=model, shared_name=shared_name)


def set_model_resource(tokenizer, resource):
    """Makes `tokenizer` (a `SentencepieceTokenizer`) use `resource`."""
    if not hasattr(tokenizer, _RESOURCE_ATTRIBUTE):
        raise _changed(f"`SentencepieceTokenizer.{_RESOURCE_ATTRIBUTE}`")
    setattr(tokenizer, _RESOURCE_ATTRIBUTE, resource)
