"""Corpus-scale translation and scoring with an export, on an engine.

`keras-transformer corpus` (`run_corpus`) translates, n-bests or scores
text files line by line into JSON Lines shards, in this process or on a
Ray cluster (`ray_dataset` gives the job as a Ray dataset). Names load on
first use.
"""

from keras_transformer import _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    globals(),
    {
        "CorpusModel": "model",
        "CorpusOptions": "options",
        "count_records": "records",
        "iter_records": "records",
        "ray_dataset": "job",
        "read_records": "records",
        "read_shards": "records",
        "run_corpus": "job",
    },
    requires=(("tensorflow", "serving"), ("tensorflow_text", "serving")),
)
