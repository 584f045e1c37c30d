"""One data preparation for `train`, `tune` and `train_best`: a `DataConfig`
becomes tokenizers and datasets."""

import dataclasses

from keras_transformer.data import pipeline, sources
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.data.vocabulary_tokenizer import load_tokenizer

# Pairs held in the shuffle buffer of the training examples.
SHUFFLE_BUFFER = 20_000


def prepare_tokenizers(run, train_pairs, vocab_size, sample, log=print, save=True, joint=False):
    """The run's tokenizers: reused when the run has them, else learned.

    Learning is deterministic, so workers that do not `save` (all but the
    chief) get the same vocabularies without racing for the files. With
    `joint`, one vocabulary is learned from both sides' sentences and saved
    as both the source and the target tokenizer (the run directory keeps
    its layout).
    """
    if run.has_tokenizers():
        log(f"Reusing the tokenizers of {run.path}")
        return load_tokenizer(run.source_tokenizer), load_tokenizer(run.target_tokenizer)
    src, tgt = sources.sentences(train_pairs, limit=sample)
    if joint:
        log(f"Learning one joint {vocab_size}-piece vocabulary from up to {sample} pairs")
        source = target = SubwordTokenizer.train(src + tgt, vocab_size)
    else:
        log(f"Learning {vocab_size}-piece vocabularies from up to {sample} pairs")
        source = SubwordTokenizer.train(src, vocab_size)
        target = SubwordTokenizer.train(tgt, vocab_size)
    if save:
        source.save(run.source_tokenizer)
        target.save(run.target_tokenizer)
    return source, target


@dataclasses.dataclass
class PreparedData:
    """A `DataConfig`'s corpus and tokenizers, and the datasets made of them.

    Attributes:
        config: the `DataConfig` (or `TrainConfig`, `TuneConfig`) prepared.
        source_tokenizer, target_tokenizer: the `SubwordTokenizer`s.
        train_pairs: `(source, target)` strings of the training split.
        valid_pairs: those of the validation data, or None.
        corpus_stats: `CorpusStats` of the training split.
        length_stats: `LengthStats` of the training split at `max_length`.
    """

    config: object
    source_tokenizer: SubwordTokenizer
    target_tokenizer: SubwordTokenizer
    train_pairs: object
    valid_pairs: object
    corpus_stats: sources.CorpusStats
    length_stats: pipeline.LengthStats

    def train_examples(self, seed=None, repeat=False):
        """Framed, cached and shuffled training examples, unbatched, for
        callers that batch each trial differently (`tune`).

        Returns:
            A dataset of 1-D int32 `(context, target_in, target_out)`.
        """
        examples = pipeline.frame_examples(
            self.train_pairs,
            self.source_tokenizer,
            self.target_tokenizer,
            self.config.max_length,
            self.config.length_policy,
        ).cache()
        examples = examples.shuffle(SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=True)
        return examples.repeat() if repeat else examples

    def train_batches(self, batch_tokens, seed=None, repeat=False, pad_to_edges=False):
        """`train_examples` in token-budget batches, as `fit` takes them
        (padded to their bucket's edge with `pad_to_edges`)."""
        return pipeline.batch_by_tokens(
            self.train_examples(seed, repeat), batch_tokens, self.config.max_length, pad_to_edges
        )

    def valid_batches(self, batch_tokens, pad_to_edges=False):
        """Validation batches in corpus order, or None without validation data."""
        if self.valid_pairs is None:
            return None
        return pipeline.make_batches(
            self.valid_pairs,
            self.source_tokenizer,
            self.target_tokenizer,
            batch_tokens=batch_tokens,
            max_length=self.config.max_length,
            policy=self.config.length_policy,
            shuffle=False,
            pad_to_edges=pad_to_edges,
        )

    def stats(self):
        """The corpus and vocabulary statistics, as a run's `data_stats.json` holds them."""
        return {
            "corpus": dataclasses.asdict(self.corpus_stats),
            "length": dataclasses.asdict(self.length_stats),
            "source_vocab_size": self.source_tokenizer.vocab_size,
            "target_vocab_size": self.target_tokenizer.vocab_size,
        }


def prepare_data(config, run, log=print, save=True):
    """Loads `config`'s corpus and the run's tokenizers (learning them on
    first use).

    Args:
        config: a `DataConfig`, or a config extending it (`TrainConfig`,
            `TuneConfig`).
        run: the `RunDirectory` that keeps the tokenizers and
            `data_stats.json`.
        log: where progress lines go.
        save: write the tokenizers and statistics; False on all workers but
            the chief of a distributed job.

    Returns:
        A `PreparedData`.

    Example:

    >>> from keras_transformer.data.config import DataConfig
    >>> from keras_transformer.training import RunDirectory
    >>> config = DataConfig(
    ...     dataset="synthetic", data_dir=data_dir, vocab_size=200, tokenizer_sample=2000
    ... )
    >>> data = prepare_data(config, RunDirectory(tmp_dir), log=lambda line: None)
    >>> (context, target_in), target_out = next(iter(data.train_batches(512)))
    >>> int(context.shape[0]) > 1
    True
    """
    train_pairs, corpus_stats = sources.load_dataset(config.dataset, "train", config.data_dir)
    log(f"Training pairs: {corpus_stats.pairs} ({corpus_stats.empty_dropped} empty dropped)")
    source_tokenizer, target_tokenizer = prepare_tokenizers(
        run,
        train_pairs,
        config.vocab_size,
        config.tokenizer_sample,
        log,
        save=save,
        joint=config.joint_vocabulary,
    )
    framed = pipeline.tokenize_pairs(
        train_pairs,
        source_tokenizer,
        target_tokenizer,
        config.max_length,
        config.length_policy,
    )
    length_stats = pipeline.length_stats(framed, config.length_policy)
    log(f"Length filter: {length_stats.describe()}")
    valid_pairs = None
    valid_spec = config.validation_spec()
    if valid_spec is not None:
        valid_pairs, valid_stats = sources.load_dataset(*valid_spec, config.data_dir)
        log(f"Validation pairs: {valid_stats.pairs}")
    data = PreparedData(
        config,
        source_tokenizer,
        target_tokenizer,
        train_pairs,
        valid_pairs,
        corpus_stats,
        length_stats,
    )
    if save:
        run.write_json(run.data_stats, data.stats())
    return data
