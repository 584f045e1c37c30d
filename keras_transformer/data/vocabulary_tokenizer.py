"""SentencePiece pieces looked up in a vocabulary of the model's own ids.

Checkpoints of other toolkits (Marian and the OPUS-MT models, in the
Hugging Face format) tokenize in two steps: SentencePiece cuts text into
pieces, and each piece is looked up in the model's vocabulary (`vocab.json`),
whose ids are not the SentencePiece model's. `VocabularyTokenizer` does both
in the graph, with TF Text and a `tf.lookup` table, so that an exported
SavedModel still takes and returns strings.
"""

import json
import os

import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer.data import tf_text_adapter
from keras_transformer.data.tokenizer import (
    END_ID,
    UNK_ID,
    _SentencepieceResource,
    before_end,
)

# A leading `>>xxx<<` (a multilingual model's target language) is one
# token, whatever lies between the brackets, as MarianTokenizer reads it.
_LANGUAGE_CODE = r"(?s)^(>>.*?<<)"
SPACE_PIECE = "\u2581"


class VocabularyTokenizer(tf.Module):
    """A SentencePiece model and a vocabulary mapping its pieces to model ids.

    Ids 0-3 are this package's padding, unknown, start and end tokens (the
    vocabulary names them as the checkpoint does); the pieces from id 4 on
    are the checkpoint's. Tokenizing cuts the text with SentencePiece,
    takes a leading `>>xxx<<` as one token, and looks every piece up (a
    piece missing from the vocabulary is unknown, id 1), as
    `transformers`' `MarianTokenizer` does. Detokenizing joins the pieces of
    the ids before the first end token, special tokens dropped, and turns
    SentencePiece's `▁` into spaces, as `MarianTokenizer.decode(...,
    skip_special_tokens=True)` does.

    Args:
        model_proto: the serialized SentencePiece model (bytes).
        pieces: the vocabulary, a list of str: piece `i` is id `i`.
        name: module name.

    Example:

    >>> import sentencepiece as spm, io
    >>> proto = io.BytesIO()
    >>> spm.SentencePieceTrainer.train(
    ...     sentence_iterator=iter(["Guten Tag!", "Grüß Gott."] * 10), model_writer=proto,
    ...     vocab_size=20, hard_vocab_limit=False, minloglevel=2)
    >>> processor = spm.SentencePieceProcessor(model_proto=proto.getvalue())
    >>> pieces = processor.encode("Guten Tag!", out_type=str)  # the model's own cut
    >>> vocabulary = ["<pad>", "<unk>", "<s>", "</s>", *pieces]
    >>> tokenizer = VocabularyTokenizer(proto.getvalue(), vocabulary)
    >>> ids = tokenizer.tokenize(tf.constant(["Guten Tag!", "Grüß"]))
    >>> ids.to_list()[0] == list(range(4, 4 + len(pieces))), 1 in ids.to_list()[1]
    (True, True)
    >>> tokenizer.detokenize(ids).numpy()[0]
    b'Guten Tag!'
    """

    def __init__(self, model_proto, pieces, name=None):
        super().__init__(name=name)
        pieces = [str(p) for p in pieces]
        if len(pieces) <= END_ID:
            raise ValueError(f"A vocabulary needs ids 0-{END_ID} and pieces. Received {pieces}")
        duplicates = len(pieces) - END_ID - 1 - len(set(pieces[END_ID + 1 :]))
        if duplicates:
            raise ValueError(f"The vocabulary repeats {duplicates} piece(s)")
        self.model_proto = bytes(model_proto)
        self._pieces = pieces
        self.vocab_size = len(pieces)
        self.tokenizer = tf_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.string)
        tf_text_adapter.set_model_resource(self.tokenizer, _SentencepieceResource(self.model_proto))
        # Special tokens are never looked up by name: text that spells one
        # is text.
        lookup = {p: i for i, p in enumerate(pieces) if i > END_ID}
        self.piece_ids = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(lookup), tf.string),
                tf.constant(list(lookup.values()), tf.int32),
            ),
            default_value=UNK_ID,
        )
        self.piece_strings = tf.constant(pieces, tf.string)

    @classmethod
    def load(cls, path):
        """Reads the SentencePiece model at `path` and the vocabulary beside
        it (`vocabulary_path(path)`)."""
        with open(path, "rb") as f:
            proto = f.read()
        with open(vocabulary_path(path), encoding="utf-8") as f:
            return cls(proto, json.load(f))

    def save(self, path):
        """Writes the SentencePiece model to `path` and the vocabulary beside it."""
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        for target, data in (
            (path, self.model_proto),
            (vocabulary_path(path), json.dumps(self._pieces, ensure_ascii=False).encode()),
        ):
            with open(f"{target}.tmp", "wb") as f:
                f.write(data)
            os.replace(f"{target}.tmp", target)

    def tokenize(self, strings):
        """`[batch]` strings -> ragged int32 ids `[batch, (length)]`, no end token."""
        strings = tf.convert_to_tensor(strings, tf.string)
        has_code = tf.strings.regex_full_match(strings, _LANGUAGE_CODE + ".*")
        code = tf.strings.regex_replace(strings, _LANGUAGE_CODE + ".*$", r"\1")
        text = tf.where(has_code, tf.strings.regex_replace(strings, _LANGUAGE_CODE, ""), strings)
        pieces = self.tokenizer.tokenize(text)
        code_piece = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(code, has_code), tf.cast(has_code, tf.int64)
        )
        pieces = tf.concat([code_piece, pieces], axis=1)
        return tf.ragged.map_flat_values(self.piece_ids.lookup, pieces)

    def detokenize(self, ids):
        """Ids (dense, padded, or ragged; `[batch, length]`) -> `[batch]` text.

        Everything from the first end token on is dropped, as are padding,
        start and unknown tokens.
        """
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.cast(ids, tf.int32)
        keep = tf.logical_and(before_end(ids), ids > END_ID)
        keep = tf.logical_and(keep, ids < self.vocab_size)
        pieces = tf.ragged.map_flat_values(
            lambda flat: tf.gather(self.piece_strings, flat), tf.ragged.boolean_mask(ids, keep)
        )
        text = tf.strings.reduce_join(pieces, axis=1)
        return tf.strings.strip(tf.strings.regex_replace(text, SPACE_PIECE, " "))

    def pieces(self):
        """The vocabulary: a list of str, piece `i` being id `i`."""
        return list(self._pieces)

    def id_to_piece(self, ids):
        """Ids -> their pieces (for attention plots)."""
        return tf.gather(self.piece_strings, ids)


def vocabulary_path(model_path):
    """Where the vocabulary of the SentencePiece model at `model_path` lies."""
    return os.path.splitext(model_path)[0] + ".pieces.json"


def load_tokenizer(path):
    """The tokenizer saved at `path`: a `VocabularyTokenizer` when a
    vocabulary lies beside the SentencePiece model, else a
    `SubwordTokenizer`."""
    from keras_transformer.data.tokenizer import SubwordTokenizer

    kind = VocabularyTokenizer if os.path.exists(vocabulary_path(path)) else SubwordTokenizer
    try:
        return kind.load(path)
    except tf.errors.OpError:  # TF Text's parser: the bytes are no model
        raise ValueError(f"{path} cannot be read as a tokenizer: no SentencePiece model") from None
    except ValueError as error:  # the reserved ids, the vocabulary beside it
        raise ValueError(f"{path} cannot be read as a tokenizer: {error}") from None
