"""Subword tokenization in the graph: SentencePiece run by tensorflow-text.

The vocabulary is learned with the `sentencepiece` trainer (unigram model,
full character coverage, NFKC normalization) and executed by
`tensorflow_text.SentencepieceTokenizer`, so tokenization runs inside
`tf.data` and inside the exported SavedModel: clients send raw strings.
SentencePiece keeps whitespace as part of the pieces, so detokenization
restores the original spacing and punctuation exactly.
"""

import io
import os
import uuid

import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer.data import tf_text_adapter
from keras_transformer.special_ids import END_ID, PAD_ID, START_ID, UNK_ID  # noqa: F401 (theirs)


def before_end(ids):
    """True on the tokens of ragged int32 `ids` `[batch, (length)]` that come
    before each row's first end token: what detokenizing keeps."""
    return tf.equal(tf.math.cumsum(tf.cast(tf.equal(ids, END_ID), tf.int32), axis=1), 0)


class _SentencepieceResource(tf.saved_model.experimental.TrackableResource):
    """The SentencePiece model, held by TensorFlow's resource manager.

    tensorflow-text's own resource belongs to the eager kernel that made it,
    so clearing TensorFlow's kernel cache (`tf.random.set_seed`,
    `keras.backend.clear_session`, as keras-tuner does between trials) frees
    it while tokenizers still hold its handle. A unique `shared_name` puts
    the resource in the resource manager instead, where it lives on.
    """

    def __init__(self, model_proto):
        super().__init__()
        self._model = model_proto
        self._shared_name = f"keras_transformer_sentencepiece_{uuid.uuid4().hex}"
        _ = self.resource_handle  # creates the resource

    def _create_resource(self):
        return tf_text_adapter.sentencepiece_op(self._model, self._shared_name)


class SubwordTokenizer(tf.Module):
    """A trackable SentencePiece tokenizer with the reserved ids of this package.

    Ids: 0 pad, 1 unknown, 2 start, 3 end. Saved inside a SavedModel as a
    tracked resource that holds the serialized model.

    Args:
        model_proto: the serialized SentencePiece model (bytes).
        name: module name.

    Example:

    >>> tokenizer = SubwordTokenizer.train(["Guten Tag!", "Grüß Gott."], 60)
    >>> ids = tokenizer.tokenize(tf.constant(["Guten Tag!"]))
    >>> tokenizer.detokenize(ids).numpy()
    array([b'Guten Tag!'], dtype=object)
    """

    def __init__(self, model_proto, name=None):
        super().__init__(name=name)
        self.model_proto = bytes(model_proto)
        self.tokenizer = tf_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32)
        tf_text_adapter.set_model_resource(self.tokenizer, _SentencepieceResource(self.model_proto))
        self.vocab_size = int(self.tokenizer.vocab_size())
        pieces = self.tokenizer.id_to_string(tf.range(4)).numpy()
        expected = [b"<pad>", b"<unk>", b"<s>", b"</s>"]
        if list(pieces) != expected:
            raise ValueError(
                "The SentencePiece model must reserve ids 0-3 for "
                f"{[p.decode() for p in expected]}. Received: {list(pieces)}"
            )

    @classmethod
    def train(cls, sentences, vocab_size, byte_fallback=None, max_sentences=2_000_000):
        """Learns a vocabulary from `sentences` (an iterable of str).

        Args:
            sentences: training text.
            vocab_size: target vocabulary size, reserved ids included; on a
                small corpus the vocabulary may come out smaller.
            byte_fallback: spell unseen characters as UTF-8 bytes instead
                of `<unk>`; by default on when `vocab_size >= 2048`.
            max_sentences: sample at most this many sentences.

        Returns:
            A `SubwordTokenizer`.
        """
        import sentencepiece as spm

        if not isinstance(vocab_size, int) or vocab_size < 8:
            raise ValueError(
                f"`vocab_size` must be an int >= 8. Received: vocab_size={vocab_size!r}"
            )
        if byte_fallback is None:
            byte_fallback = vocab_size >= 2048
        sentences = [s for s in sentences if s.strip()][:max_sentences]
        if not sentences:
            raise ValueError("Cannot train a tokenizer on no text.")
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            vocab_size=vocab_size,
            model_type="unigram",
            character_coverage=1.0,
            normalization_rule_name="nmt_nfkc",
            byte_fallback=byte_fallback,
            hard_vocab_limit=False,
            input_sentence_size=max_sentences,
            # One thread and no shuffling: the same text always gives the same
            # vocabulary, which every worker of a multi-worker run relies on.
            shuffle_input_sentence=False,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=START_ID,
            eos_id=END_ID,
            num_threads=1,
            minloglevel=2,
        )
        return cls(model.getvalue())

    def save(self, path):
        """Writes the SentencePiece model (and a readable `.vocab` beside it)."""
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = f"{path}.tmp"
        with open(tmp, "wb") as f:
            f.write(self.model_proto)
        os.replace(tmp, path)
        pieces = self.tokenizer.id_to_string(tf.range(self.vocab_size)).numpy()
        with open(os.path.splitext(path)[0] + ".vocab", "w", encoding="utf-8") as f:
            f.writelines(p.decode("utf-8") + "\n" for p in pieces)

    @classmethod
    def load(cls, path):
        """Reads a model written by `save` (or any SentencePiece model with
        the reserved ids)."""
        with open(path, "rb") as f:
            return cls(f.read())

    def tokenize(self, strings):
        """`[batch]` strings -> ragged int32 ids `[batch, (length)]`."""
        return self.tokenizer.tokenize(strings)

    def detokenize(self, ids):
        """Ids (dense, padded, or ragged; `[batch, length]`) -> `[batch]` text.

        Everything from the first end token on is dropped, as are pad and
        start tokens.
        """
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.cast(ids, tf.int32)
        keep = tf.logical_and(before_end(ids), tf.logical_and(ids != PAD_ID, ids != START_ID))
        return self.tokenizer.detokenize(tf.ragged.boolean_mask(ids, keep))

    def pieces(self):
        """The vocabulary: a list of str, piece `i` being id `i`."""
        ids = tf.range(self.vocab_size)
        return [p.decode("utf-8") for p in self.tokenizer.id_to_string(ids).numpy()]

    def id_to_piece(self, ids):
        """Ids -> their subword pieces (for attention plots)."""
        return self.tokenizer.id_to_string(ids)
