"""The data and vocabulary part that `TrainConfig` and `TuneConfig` share."""

import dataclasses

from keras_transformer._validation import check_positive_int
from keras_transformer.buckets import LENGTH_POLICIES
from keras_transformer.data.specs import default_validation_spec, parse_spec


@dataclasses.dataclass(kw_only=True)
class DataConfig:
    """Which corpus a job reads, and how it becomes subword ids.

    `TrainConfig` and `TuneConfig` extend it, so the two commands share these
    keys, their flags and their checks, and
    `keras_transformer.training.prepare_data` turns either into tokenizers
    and datasets the same way.

    Attributes:
        dataset: `synthetic`, `parallel:SRC,TGT` or `tfds:NAME`.
        valid: validation data (same forms), or `none`; default: the
            dataset's validation split (none for parallel files).
        data_dir: TFDS data directory.
        max_length: longest framed sequence; longer pairs are handled
            by `length_policy`.
        length_policy: `filter` or `truncate`.
        vocab_size: subword vocabulary size of each language (of the one
            joint vocabulary with `joint_vocabulary`).
        joint_vocabulary: learn one vocabulary from both languages' text
            and use it on both sides, as a model with `share_embeddings`
            (the `transformer_tiny` preset) needs.
        tokenizer_sample: sentences used to learn each vocabulary.

    Example:

    >>> config = DataConfig(dataset="parallel:train.en,train.de", valid="none")
    >>> config.validation_spec() is None
    True
    >>> DataConfig(dataset="synthetic").validation_spec()
    ('synthetic', 'validation')
    """

    dataset: str = "synthetic"
    valid: str | None = None
    data_dir: str | None = None
    max_length: int = 128
    length_policy: str = dataclasses.field(default="filter", metadata={"choices": LENGTH_POLICIES})
    vocab_size: int = 8000
    joint_vocabulary: bool = False
    tokenizer_sample: int = 200_000

    def __post_init__(self):
        self.validate()

    def validate(self):
        """Raises a `ValueError` naming the first key with a bad value."""
        if not isinstance(self.dataset, str) or not self.dataset:
            raise ValueError(f"`dataset` is required. Received: dataset={self.dataset!r}")
        parse_spec(self.dataset)
        if self.valid is not None and not isinstance(self.valid, str):
            raise ValueError(f"`valid` must be a dataset spec. Received: valid={self.valid!r}")
        if self.valid not in (None, "none"):
            parse_spec(self.valid)
        for name in ("max_length", "vocab_size", "tokenizer_sample"):
            check_positive_int(name, getattr(self, name))
        if self.length_policy not in LENGTH_POLICIES:
            raise ValueError(
                f"`length_policy` must be one of {LENGTH_POLICIES}. "
                f"Received: length_policy={self.length_policy!r}"
            )

    def validation_spec(self):
        """`(spec, split)` of the validation data, or None for none."""
        if self.valid == "none":
            return None
        if self.valid:
            return self.valid, "validation"
        return default_validation_spec(self.dataset)

    def data_options(self):
        """This config's `DataConfig` keys, as a dict."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(DataConfig)}
