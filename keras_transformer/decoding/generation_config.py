"""`GenerationConfig`: how a translation is searched for, as one typed value.

The one place of every decoding default and check. A run keeps its own in
`generation.json` (an imported checkpoint's), an export records the one it
was made with, and `export` and `evaluate` derive their decoding flags from
its fields. As `transformers`' `GenerationConfig`, it is read and written
as JSON; as CTranslate2's `translate_batch` keywords, it names the
constraints too. It imports neither TensorFlow nor Keras, so that the
command line can describe and check it before they load.
"""

import dataclasses
import json
import os

from keras_transformer._validation import (
    check_alpha,
    check_positive_int,
    check_sampling,
    shown,
)

# The forms of the length penalty a hypothesis' log-probability is divided by.
PENALTIES = ("gnmt", "power")
# Kept in a run's generation.json by the Marian import: what generate()
# would apply that the searches do not (named, not silently dropped).
_NOTES = ("ignored",)


@dataclasses.dataclass(frozen=True)
class GenerationConfig:
    """The decoding settings of a translator, its export and its run.

    Attributes:
        beam_size: beams of the beam search; 1 decodes greedily.
        alpha: length-penalty exponent of the searches' scores; 0 for none,
            negative to favour short translations.
        length_penalty: the penalty's form: gnmt, ((5 + length) / 6) **
            alpha; power, length ** alpha, as transformers' generate().
        max_output_length: longest translation, in tokens (at most the
            model's position table).
        max_input_length: longest source, in tokens: a longer one is cut,
            keeping its end token (at most the model's position table).
        forced_end: a translation reaching max_output_length ends there
            with the end token, as generate()'s forced_eos_token_id;
            off, it is cut there.
        renormalize: the searches normalize each step's probabilities again
            once the banned tokens are removed, as generate()'s
            renormalize_logits.
        sampling_temperature: temperature of translate_sample: above 1
            flatter, below 1 sharper.
        sampling_topk: translate_sample draws from the k most likely
            tokens; 0 for all, 1 is greedy.
        sampling_topp: translate_sample draws from the fewest most likely
            tokens whose probability reaches p (nucleus sampling); 1 for
            all.
        suppress_sequences: words or phrases no translation may contain,
            each tokenized by the target tokenizer and banned as
            generate()'s bad_words_ids bans it (its last token is refused
            where it would complete it); on the command line, a file of
            one phrase a line.
        disable_unk: never generate the unknown token, as CTranslate2's
            disable_unk.

    Example:

    >>> config = GenerationConfig(beam_size=5)
    >>> config.merged(alpha=1.0, beam_size=None).alpha, config.beam_size
    (1.0, 5)
    >>> GenerationConfig.from_dict(config.to_dict()) == config
    True
    """

    beam_size: int = 4
    alpha: float = 0.6
    length_penalty: str = dataclasses.field(default="gnmt", metadata={"choices": PENALTIES})
    max_output_length: int = 128
    max_input_length: int = 256
    forced_end: bool = False
    renormalize: bool = False
    sampling_temperature: float = 1.0
    sampling_topk: int = 0
    sampling_topp: float = 1.0
    suppress_sequences: tuple = dataclasses.field(
        default=(), metadata={"lines_file": True, "metavar": "FILE"}
    )
    disable_unk: bool = False

    def __post_init__(self):
        for name in ("beam_size", "max_output_length", "max_input_length"):
            check_positive_int(name, getattr(self, name))
        check_alpha(self.alpha)
        if self.length_penalty not in PENALTIES:
            raise ValueError(
                f"`length_penalty` must be one of {PENALTIES}. "
                f"Received: length_penalty={shown(self.length_penalty)}"
            )
        for name in ("forced_end", "renormalize", "disable_unk"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"`{name}` must be true or false. Received: {name}={getattr(self, name)!r}"
                )
        names = ("sampling_temperature", "sampling_topk", "sampling_topp")
        sampling = check_sampling(*(getattr(self, n) for n in names), names=names)
        # Frozen: the normalized values are set through object's own setattr.
        for name, value in zip(names, sampling):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "alpha", float(self.alpha))
        object.__setattr__(self, "suppress_sequences", _phrases(self.suppress_sequences))

    @classmethod
    def field_names(cls):
        """The names of the settings, in order."""
        return tuple(field.name for field in dataclasses.fields(cls))

    def merged(self, **settings):
        """This config with `settings` over it; a None value keeps this
        config's (a flag not given). The one merge of flags, files and
        defaults: an unknown name is an error naming it."""
        unknown = sorted(set(settings) - set(self.field_names()))
        if unknown:
            raise ValueError(f"Unknown generation setting(s): {', '.join(unknown)}")
        given = {name: value for name, value in settings.items() if value is not None}
        return dataclasses.replace(self, **given)

    def to_dict(self):
        """The settings as JSON values (`suppress_sequences` a list)."""
        values = dataclasses.asdict(self)
        values["suppress_sequences"] = list(self.suppress_sequences)
        return values

    @classmethod
    def from_dict(cls, values, source="generation settings"):
        """A config from `to_dict()`'s keys, or fewer (the others are the
        defaults); an unknown key is an error naming `source`. The notes a
        run keeps beside its settings (`ignored`: what an imported
        checkpoint's generate() would apply) are not settings, and are
        skipped."""
        values = {k: v for k, v in dict(values).items() if k not in _NOTES}
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            raise ValueError(f"{source}: unknown generation setting(s): {', '.join(unknown)}")
        try:
            return cls(**values)
        except ValueError as error:
            raise ValueError(f"{source}: {error}") from None

    @classmethod
    def read(cls, path):
        """The config of a JSON file (a run's `generation.json`, an
        export's record of its own); the defaults if `path` does not
        exist."""
        if not os.path.exists(path):
            return cls()
        try:
            with open(path, encoding="utf-8") as f:
                values = json.load(f)
        except ValueError as error:
            raise ValueError(f"{path} is not a JSON file: {error}") from None
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected a JSON object of generation settings")
        return cls.from_dict(values, source=path)

    def suppressed_ids(self, target_tokenizer):
        """Each of `suppress_sequences` as the target tokenizer's ids (a
        list of ints a phrase); a phrase of no token is refused, naming it."""
        sequences = []
        for phrase in self.suppress_sequences:
            ids = target_tokenizer.tokenize([phrase])[0].numpy().tolist()
            if not ids:
                raise ValueError(f"`suppress_sequences`: {shown(phrase)} tokenizes to no token")
            sequences.append(ids)
        return sequences

    @classmethod
    def for_run(cls, run_path):
        """The config of a training run: its `generation.json` (an
        imported checkpoint's settings), the defaults where it has none."""
        from keras_transformer.training.run_directory import RunDirectory, read_generation

        source = RunDirectory(run_path).generation
        return cls.from_dict(read_generation(run_path), source=source)

    def write(self, path):
        """Writes `to_dict()` to `path` as JSON."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1, ensure_ascii=False)
            f.write("\n")


def _phrases(value):
    """`suppress_sequences` as a tuple of non-blank strings: a phrase is a
    string, and the text of a file is read a phrase a line."""
    if isinstance(value, str):
        raise ValueError(
            "`suppress_sequences` must be a list of phrases, not one string. "
            f"Received: suppress_sequences={shown(value)}"
        )
    phrases = tuple(value)
    for phrase in phrases:
        if not isinstance(phrase, str) or not phrase.strip():
            raise ValueError(
                "`suppress_sequences`: each phrase must be a non-blank string. "
                f"Received: {shown(phrase)}"
            )
    return phrases
