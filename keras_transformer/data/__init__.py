"""Data: corpora (`synthetic`, `parallel:`, `tfds:`), tokenizers, tf.data pipeline.

Names load on first use; importing the package checks the `data` extra."""

from keras_transformer import _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    globals(),
    {
        "CorpusStats": "sources",
        "DataConfig": "config",
        "END_ID": "tokenizer",
        "LengthStats": "pipeline",
        "PAD_ID": "tokenizer",
        "START_ID": "tokenizer",
        "SubwordTokenizer": "tokenizer",
        "UNK_ID": "tokenizer",
        "VocabularyTokenizer": "vocabulary_tokenizer",
        "generate_pairs": "synthetic",
        "length_stats": "pipeline",
        "load_dataset": "sources",
        "load_tokenizer": "vocabulary_tokenizer",
        "make_batches": "pipeline",
        "parse_spec": "sources",
        "read_parallel_files": "sources",
        "tokenize_pairs": "pipeline",
    },
    requires=(("tensorflow", "data"), ("tensorflow_text", "data")),
)
