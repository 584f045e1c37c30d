"""Marian checkpoints in the Hugging Face format (the OPUS-MT models), as runs.

`import_marian(folder, run_dir)` reads a `MarianMTModel` folder
(`config.json`, `model.safetensors` or `pytorch_model.bin`, `source.spm`,
`target.spm`, `vocab.json` and, with separate vocabularies,
`target_vocab.json`, `generation_config.json`) and writes a run directory
that `export`, `evaluate` and `train --init-from` take as a trained run.

The model is this library's `Transformer` with Marian's options: post-norm,
layer norm epsilon 1e-5, the sinusoidal table in halves, the embedding
scale of `scale_embedding`, the feed-forward activation of
`activation_function`, an output projection tied to the target embedding
with `final_logits_bias` added. The vocabulary is reordered to this
library's reserved ids (0 padding, 1 unknown, 2 start, 3 end): Marian
starts decoding from its padding token, whose row becomes both our padding
row and our start row; the start token's output logit is held at -1e4 so
that the softmax is Marian's over its own vocabulary. The tokenizers are
`VocabularyTokenizer`s (SentencePiece, then the vocabulary lookup), in the
graph of every export. `generation.json` keeps the checkpoint's beams,
length penalty (`length ** length_penalty`), maximum length and forced end
token, so that an export decodes as `generate()` does.
"""

import datetime
import hashlib
import json
import os

import numpy as np

from keras_transformer.interop import checkpoint, weight_tables

# Marian's `activation_function` -> the Keras activation computing it:
# transformers' names (`ACT2FN`) whose function Keras has exactly.
ACTIVATIONS = {
    "swish": "silu", "silu": "silu", "gelu": "gelu", "gelu_python": "gelu", "relu": "relu",
    # The tanh approximation of GELU, under transformers' names for it.
    "gelu_new": "keras_transformer>gelu_tanh", "gelu_fast": "keras_transformer>gelu_tanh",
    "gelu_pytorch_tanh": "keras_transformer>gelu_tanh",
    "gelu_python_tanh": "keras_transformer>gelu_tanh",
    "gelu_accurate": "keras_transformer>gelu_tanh",
    "quick_gelu": "keras_transformer>gelu_sigmoid",
    "tanh": "tanh", "sigmoid": "sigmoid", "relu6": "relu6", "mish": "mish",
    "hardswish": "hard_silu", "linear": "linear",
}  # fmt: skip
# The most beams a checkpoint may ask for: each multiplies the search's memory.
MAX_BEAMS = 256
START_LOGIT = -1.0e4  # our start row is never predicted: exp(-1e4) is 0 in float32
FILES = {
    "source_spm": "source.spm",
    "target_spm": "target.spm",
    "vocab": "vocab.json",
    "target_vocab_file": "target_vocab.json",
}


class MarianSpec:
    """The architecture and special ids a Marian `config.json` gives,
    checked before anything is allocated."""

    def __init__(self, config):
        if config.get("model_type") != "marian":
            raise ValueError(
                f"config.json has model_type {config.get('model_type')!r}, not 'marian'"
            )
        limits = checkpoint.LIMITS
        self.d_model = _size("d_model", config.get("d_model"), limits["d_model"])
        layers = {}
        for key in ("encoder_layers", "decoder_layers"):
            layers[key] = _size(key, config.get(key), limits["layers"])
        heads = {}
        for key in ("encoder_attention_heads", "decoder_attention_heads"):
            heads[key] = _size(key, config.get(key), limits["heads"])
        ffn = {}
        for key in ("encoder_ffn_dim", "decoder_ffn_dim"):
            ffn[key] = _size(key, config.get(key), limits["ffn_dim"])
        self.source_vocab_size = _size("vocab_size", config.get("vocab_size"), limits["vocab_size"])
        self.target_vocab_size = _size(
            "decoder_vocab_size",
            config.get("decoder_vocab_size") or self.source_vocab_size,
            limits["vocab_size"],
        )
        self.max_positions = _size(
            "max_position_embeddings",
            config.get("max_position_embeddings", 512),
            limits["max_position_embeddings"],
        )
        # Each stack has its own depth, heads and feed-forward width.
        self.num_layers = layers["encoder_layers"]
        self.num_decoder_layers = layers["decoder_layers"]
        self.num_heads = heads["encoder_attention_heads"]
        self.decoder_num_heads = heads["decoder_attention_heads"]
        self.dff = ffn["encoder_ffn_dim"]
        self.decoder_dff = ffn["decoder_ffn_dim"]
        for key, number in heads.items():
            if self.d_model % number:
                raise ValueError(
                    f"config.json: d_model={self.d_model} is not a multiple of {key}={number}"
                )
        activation = config.get("activation_function", "gelu")
        if not isinstance(activation, str) or activation not in ACTIVATIONS:
            raise ValueError(
                f"activation_function {activation!r} is not supported; "
                f"supported: {sorted(ACTIVATIONS)}"
            )
        self.activation = ACTIVATIONS[activation]
        self.shared = bool(config.get("share_encoder_decoder_embeddings", True))
        if self.shared and self.source_vocab_size != self.target_vocab_size:
            raise ValueError(
                "share_encoder_decoder_embeddings needs vocab_size == decoder_vocab_size. "
                f"Received: {self.source_vocab_size}, {self.target_vocab_size}"
            )
        self.tied = bool(config.get("tie_word_embeddings", True))
        # Shared but untied: transformers 5 then ties nothing, and the
        # encoder's and decoder's tables are their own (`model.shared` is
        # unused); older checkpoints hold only `model.shared`, both stacks'
        # table. `check_tensors` tells which.
        self.own_input_tables = False
        self.scale_embedding = bool(config.get("scale_embedding", False))
        self.dropout = _rate(config, "dropout", 0.1)
        self.attention_dropout = _rate(config, "attention_dropout", 0.0)
        smaller = min(self.source_vocab_size, self.target_vocab_size)
        self.pad_id = _special(config, "pad_token_id", smaller)
        self.eos_id = _special(config, "eos_token_id", smaller)
        start = config.get("decoder_start_token_id", self.pad_id)
        if start != self.pad_id:
            raise ValueError(
                f"decoder_start_token_id={start} is not the padding id {self.pad_id}: "
                "only Marian's start from padding is supported"
            )
        self.forced_eos = config.get("forced_eos_token_id") == self.eos_id

    def expected_shapes(self):
        """Every tensor of the checkpoint and its shape."""
        d = self.d_model
        shapes = {"final_logits_bias": (1, self.target_vocab_size)}
        if self.shared:
            shapes["model.shared.weight"] = (self.source_vocab_size, d)
        if not self.shared or self.own_input_tables:
            shapes["model.encoder.embed_tokens.weight"] = (self.source_vocab_size, d)
            shapes["model.decoder.embed_tokens.weight"] = (self.target_vocab_size, d)
        if not self.tied:
            shapes["lm_head.weight"] = (self.target_vocab_size, d)
        attention = ("self_attn",)
        stacks = (
            ("encoder", attention, self.num_layers, self.dff),
            ("decoder", (*attention, "encoder_attn"), self.num_decoder_layers, self.decoder_dff),
        )
        for stack, names, depth, f in stacks:
            for i in range(depth):
                prefix = f"model.{stack}.layers.{i}."
                for name in names:
                    for projection in ("q_proj", "k_proj", "v_proj", "out_proj"):
                        shapes[f"{prefix}{name}.{projection}.weight"] = (d, d)
                        shapes[f"{prefix}{name}.{projection}.bias"] = (d,)
                    shapes[f"{prefix}{name}_layer_norm.weight"] = (d,)
                    shapes[f"{prefix}{name}_layer_norm.bias"] = (d,)
                shapes[f"{prefix}fc1.weight"] = (f, d)
                shapes[f"{prefix}fc1.bias"] = (f,)
                shapes[f"{prefix}fc2.weight"] = (d, f)
                shapes[f"{prefix}fc2.bias"] = (d,)
                shapes[f"{prefix}final_layer_norm.weight"] = (d,)
                shapes[f"{prefix}final_layer_norm.bias"] = (d,)
        return shapes


def _size(key, value, limit):
    return checkpoint.check_number("config.json", key, value, most=limit)


def _rate(config, key, default):
    """A dropout rate of config.json, in [0, 1): fine-tuning applies it."""
    rate = checkpoint.check_number("config.json", key, config.get(key, default), 1.0,
                                   kind=float, least=0.0)  # fmt: skip
    if rate == 1.0:
        raise ValueError(f"config.json: {key} must be a number in [0.0, 1.0). Received: 1.0")
    return rate


def _special(config, key, vocab_size):
    return checkpoint.check_number("config.json", key, config.get(key), vocab_size - 1, least=0)


def check_tensors(spec, tensors):
    """Refuses a tensor missing, extra, or of the wrong shape, naming it.

    Copies of tied weights that older checkpoints store (`lm_head.weight`,
    per-stack `embed_tokens` beside `model.shared.weight`) and the fixed
    sinusoidal tables (`embed_positions.weight`) are accepted when they
    equal what they copy; they are not read. A shared, untied checkpoint
    whose stacks' tables differ from `model.shared.weight` (as
    transformers 5 writes one) sets `spec.own_input_tables`.
    """
    tables = ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")
    if spec.shared and not spec.tied and "model.shared.weight" in tensors:
        shared = tensors["model.shared.weight"]
        differ = [
            name for name in tables
            if name in tensors and (tensors[name].shape != shared.shape
                                    or not np.array_equal(tensors[name], shared))
        ]  # fmt: skip
        spec.own_input_tables = bool(differ)
    expected = spec.expected_shapes()
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise ValueError(f"The checkpoint lacks {len(missing)} tensor(s): {', '.join(missing[:5])}")
    copies = {}
    if spec.shared and not spec.own_input_tables:
        copies["model.encoder.embed_tokens.weight"] = "model.shared.weight"
        copies["model.decoder.embed_tokens.weight"] = "model.shared.weight"
    if spec.tied:
        copies["lm_head.weight"] = (
            "model.shared.weight" if spec.shared else "model.decoder.embed_tokens.weight"
        )
    from keras_transformer.layers import sinusoidal_position_encoding

    table = None
    for name in sorted(set(tensors) - set(expected)):
        value = tensors[name]
        if name in copies:
            if value.shape != tensors[copies[name]].shape or not np.array_equal(
                value, tensors[copies[name]]
            ):
                raise ValueError(f"{name} should be a copy of {copies[name]} but differs")
        elif name in (
            "model.encoder.embed_positions.weight",
            "model.decoder.embed_positions.weight",
        ):
            if table is None:
                table = sinusoidal_position_encoding(
                    spec.max_positions, spec.d_model, layout="halves"
                )
            if value.shape != table.shape or not np.allclose(value, table, atol=1e-4):
                raise ValueError(f"{name} is not Marian's sinusoidal table of {table.shape}")
        else:
            raise ValueError(f"The checkpoint has a tensor the config does not give: {name}")
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != shape:
            raise ValueError(
                f"{name} has shape {tuple(tensors[name].shape)}; the config gives {shape}"
            )


def marian_order(vocab_size, pad_id, unk_id, eos_id):
    """Marian's id of each of our ids: padding, unknown, start (Marian's
    padding again), end, then the other pieces in Marian's order."""
    special = {pad_id, unk_id, eos_id}
    return [pad_id, unk_id, pad_id, eos_id] + [i for i in range(vocab_size) if i not in special]


def _vocabulary(folder, name, vocab_size):
    """Marian's vocabulary (piece -> id) as a list of pieces by id."""
    vocab = checkpoint.read_json(folder, name)
    pieces = [None] * vocab_size
    for piece, index in vocab.items():
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < vocab_size:
            raise ValueError(f"{name}: {piece!r} has id {index!r}, not one below {vocab_size}")
        if pieces[index] is not None:
            raise ValueError(f"{name}: id {index} is given to {pieces[index]!r} and {piece!r}")
        pieces[index] = piece
    if None in pieces:
        raise ValueError(
            f"{name} holds {len(vocab)} pieces; the config's vocabulary has {vocab_size}"
        )
    if "<unk>" not in vocab:
        raise ValueError(f"{name} has no <unk> piece")
    return pieces, vocab["<unk>"]


def _spm_pieces(proto, path):
    """The pieces of the SentencePiece model `proto` (read from `path`);
    a file that is not one is refused, naming it."""
    import sentencepiece

    error = "it is empty"
    if proto:
        try:
            processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
        except RuntimeError as raised:  # its parser's message, on a line of its own
            error = str(raised).strip().splitlines()[0]
        else:
            pieces = {processor.id_to_piece(i) for i in range(processor.get_piece_size())}
            if pieces:
                return pieces
            error = "it holds no piece"
    raise ValueError(f"{path} is not a SentencePiece model: {error}")


def read_marian(folder):
    """Reads and checks a Marian folder; returns what `import_marian` writes.

    Returns:
        A dict: `spec` (`MarianSpec`), `tensors`, `source`/`target` (each
        `(spm_proto, marian_pieces, unk_id)`), `generation` (the decoding
        settings), `unproduced` (per side, how many vocabulary pieces the
        SentencePiece model never produces).
    """
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder} is not a folder")
    config = checkpoint.read_json(folder, "config.json")
    spec = MarianSpec(config)
    files = dict(FILES)
    tokenizer_config = checkpoint.read_json(folder, "tokenizer_config.json", required=False) or {}
    for key in FILES:
        if key in tokenizer_config and tokenizer_config[key] is not None:
            files[key] = tokenizer_config[key]
    separate = bool(tokenizer_config.get("separate_vocabs", not spec.shared))
    sides, known = {}, {}
    for side, spm_key, vocab_key, size in (
        ("source", "source_spm", "vocab", spec.source_vocab_size),
        ("target", "target_spm", "target_vocab_file" if separate else "vocab",
         spec.target_vocab_size),
    ):  # fmt: skip
        spm_path = checkpoint.inside(folder, files[spm_key], f"the tokenizer file {spm_key}")
        checkpoint.inside(folder, files[vocab_key], f"the tokenizer file {vocab_key}")
        if not os.path.exists(spm_path):
            raise FileNotFoundError(f"{folder} has no {files[spm_key]}")
        with open(spm_path, "rb") as f:
            proto = f.read()
        known[side] = _spm_pieces(proto, spm_path)
        pieces, unk_id = _vocabulary(folder, files[vocab_key], size)
        if pieces[spec.pad_id] != "<pad>" or pieces[spec.eos_id] != "</s>":
            raise ValueError(
                f"pad_token_id {spec.pad_id} and eos_token_id {spec.eos_id} are "
                f"{pieces[spec.pad_id]!r} and {pieces[spec.eos_id]!r} in {files[vocab_key]}, "
                "not <pad> and </s>"
            )
        sides[side] = (proto, pieces, unk_id)
    # A joint vocabulary holds both languages' pieces, each produced by one
    # of the two models: count what neither produces.
    if not separate:
        known["source"] = known["target"] = known["source"] | known["target"]
    unproduced = {}
    for side, (_, pieces, _) in sides.items():
        unproduced[side] = sum(
            1
            for p in pieces
            if p not in known[side]
            and p not in ("<pad>", "</s>", "<unk>")
            and not (p.startswith(">>") and p.endswith("<<"))
        )
    tensors = checkpoint.read_tensors(folder)
    check_tensors(spec, tensors)
    generation = _generation(spec, config, folder)
    return {
        "spec": spec,
        "tensors": tensors,
        "source": sides["source"],
        "target": sides["target"],
        "generation": generation,
        "unproduced": unproduced,
    }


# What generate() reads from config.json when a folder has no
# generation_config.json (snapshots saved before that file existed).
_LEGACY_GENERATION_KEYS = (
    "num_beams", "max_length", "max_new_tokens", "length_penalty", "bad_words_ids",
    "forced_eos_token_id", "renormalize_logits", "early_stopping", "no_repeat_ngram_size",
    "repetition_penalty", "min_length", "min_new_tokens", "do_sample", "num_beam_groups",
    "encoder_no_repeat_ngram_size",
)  # fmt: skip
# Settings of generate() that change translations, with the value that
# leaves them as this library's searches decode.
_NEUTRAL = {
    "early_stopping": False, "no_repeat_ngram_size": 0, "repetition_penalty": 1.0,
    "min_length": 0, "min_new_tokens": 0, "do_sample": False, "num_beam_groups": 1,
    "encoder_no_repeat_ngram_size": 0,
}  # fmt: skip


def _generation(spec, config, folder):
    """The run's generation settings from the checkpoint's, as generate()
    reads them: generation_config.json, else config.json's own keys.

    A setting generate() would apply that the searches here do not is kept
    under `ignored` (and named by the import), not silently dropped.
    """
    source = "generation_config.json"
    settings = checkpoint.read_json(folder, source, required=False)
    if settings is None:
        source = "config.json"
        settings = {k: config[k] for k in _LEGACY_GENERATION_KEYS if k in config}
    settings = {k: v for k, v in settings.items() if v is not None}

    def number(key, default, **bounds):
        return checkpoint.check_number(source, key, settings.get(key, default), **bounds)

    max_length = number("max_length", 512)
    if "max_new_tokens" in settings:
        # generate()'s max_length counts the start token; max_new_tokens not.
        max_length = number("max_new_tokens", None) + 1
    renormalize = settings.get("renormalize_logits", False)
    if not isinstance(renormalize, bool):
        raise ValueError(
            f"{source}: renormalize_logits must be true or false. Received: {renormalize!r}"
        )
    forced = settings.get("forced_eos_token_id", spec.eos_id if spec.forced_eos else None)
    generation = {
        "beam_size": number("num_beams", 1, most=MAX_BEAMS),
        # A negative exponent favours short translations, as in generate().
        "alpha": number("length_penalty", 1.0, kind=float, least=-float("inf")),
        "length_penalty": "power",
        "max_output_length": max(1, min(max_length, spec.max_positions) - 1),
        "forced_end": forced == spec.eos_id,
        "renormalize": renormalize,
    }
    ignored = {
        key: settings[key]
        for key, neutral in _NEUTRAL.items()
        if key in settings and settings[key] != neutral
    }
    if settings.get("bad_words_ids") not in (None, [[spec.pad_id]]):
        ignored["bad_words_ids"] = settings["bad_words_ids"]
    if ignored:
        generation["ignored"] = ignored
    return generation


def build_model(spec):
    """The `Transformer` with Marian's architecture, built, in float32."""
    from keras_transformer.models import Transformer

    model = Transformer(
        num_layers=spec.num_layers,
        num_decoder_layers=spec.num_decoder_layers,
        d_model=spec.d_model,
        num_heads=spec.num_heads,
        dff=spec.dff,
        decoder_num_heads=spec.decoder_num_heads,
        decoder_dff=spec.decoder_dff,
        source_vocab_size=spec.source_vocab_size + 1,
        target_vocab_size=spec.target_vocab_size + 1,
        dropout=spec.dropout,
        attention_dropout=spec.attention_dropout,
        max_length=spec.max_positions,
        norm_first=False,
        share_embeddings=spec.shared and not spec.own_input_tables,
        activation=spec.activation,
        position_encoding="sinusoidal",
        position_layout="halves",
        scale_embeddings=spec.scale_embedding,
        layer_norm_epsilon=1e-5,
        tie_output_embeddings=spec.tied,
        output_bias=spec.tied,
        dtype="float32",
    )
    model.build(((None, None), (None, None)))
    return model


def load_weights(model, spec, tensors, source_unk, target_unk):
    """Copies Marian's tensors into `model`, the vocabulary reordered."""
    source_order = marian_order(spec.source_vocab_size, spec.pad_id, source_unk, spec.eos_id)
    target_order = marian_order(spec.target_vocab_size, spec.pad_id, target_unk, spec.eos_id)
    if spec.shared and not spec.own_input_tables:
        model.source_embedding.embeddings.assign(tensors["model.shared.weight"][source_order])
    else:
        model.source_embedding.embeddings.assign(
            tensors["model.encoder.embed_tokens.weight"][source_order]
        )
        model.target_embedding.embeddings.assign(
            tensors["model.decoder.embed_tokens.weight"][target_order]
        )
    bias = tensors["final_logits_bias"].reshape(-1)[target_order].astype(np.float32)
    bias[2] = START_LOGIT
    if spec.tied:
        model.logits_bias.assign(bias)
    else:
        kernel = tensors["lm_head.weight"][target_order].T.copy()
        kernel[:, 2] = 0.0
        model.output_projection.kernel.assign(kernel)
        model.output_projection.bias.assign(bias)
    width = np.arange(spec.d_model)  # built with Marian's position layout
    for row in weight_tables.marian_rows(model):
        variable = weight_tables.resolve(model, row.ours)
        weight_tables.to_ours(row, tensors[row.theirs], variable, width)


def our_pieces(marian_pieces, spec, unk_id):
    """The vocabulary in our id order (our start token named `<s>`)."""
    order = marian_order(len(marian_pieces), spec.pad_id, unk_id, spec.eos_id)
    pieces = [marian_pieces[i] for i in order]
    pieces[2] = "<s>"
    return pieces


def import_marian(folder, output_dir):
    """Writes the run directory of a Marian checkpoint folder.

    Args:
        folder: a `MarianMTModel` folder (as `save_pretrained` writes it).
        output_dir: the run directory to write (must not exist).

    Returns:
        A dict of what was imported: the run path, the architecture, the
        generation settings, and how many vocabulary pieces each
        SentencePiece model never produces (such pieces are never the
        result of tokenizing text; they still decode).

    Example:

    >>> summary = import_marian(marian_dir, f"{tmp_dir}/runs/opus")
    >>> summary["generation"]["length_penalty"]
    'power'
    """
    from keras_transformer.data.vocabulary_tokenizer import VocabularyTokenizer
    from keras_transformer.training.run_directory import RunDirectory

    if os.path.exists(output_dir):
        raise FileExistsError(f"{output_dir} exists; an import never overwrites a run")
    read = read_marian(folder)
    spec = read["spec"]
    model = build_model(spec)
    load_weights(model, spec, read["tensors"], read["source"][2], read["target"][2])
    staging = f"{output_dir.rstrip(os.sep)}.importing"
    if os.path.exists(staging):
        import shutil

        shutil.rmtree(staging)
    run = RunDirectory(staging)
    os.makedirs(run.path)
    for side, path in (("source", run.source_tokenizer), ("target", run.target_tokenizer)):
        proto, pieces, unk_id = read[side]
        VocabularyTokenizer(proto, our_pieces(pieces, spec, unk_id)).save(path)
    model.save_weights(run.final_weights)
    run.write_json(run.model_config, model.get_config())
    run.write_json(run.generation, read["generation"])
    summary = {
        "imported_from": os.path.abspath(folder),
        "format": "marian",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "files": _digests(folder),
        "unproduced_pieces": read["unproduced"],
        "marian_ids": {"pad": spec.pad_id, "eos": spec.eos_id,
                       "source_unk": read["source"][2], "target_unk": read["target"][2]},
    }  # fmt: skip
    run.write_json(run.config, summary)
    os.rename(staging, output_dir)
    return {
        "run": os.path.abspath(output_dir),
        "layers": spec.num_layers,
        "decoder_layers": spec.num_decoder_layers,
        "d_model": spec.d_model,
        "source_vocab_size": spec.source_vocab_size,
        "target_vocab_size": spec.target_vocab_size,
        "shared_vocabulary": spec.shared,
        "generation": read["generation"],
        "unproduced_pieces": read["unproduced"],
    }


def _digests(folder):
    """SHA-256 of each file of the checkpoint, to tell later where a run came from."""
    digests = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not os.path.islink(path):
            sha = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(2**20), b""):
                    sha.update(block)
            digests[name] = sha.hexdigest()
    return digests


def describe(summary):
    """One paragraph for the command line."""
    generation = summary["generation"]
    lines = [
        f"Imported a Marian model ({summary['layers']}+{summary['decoder_layers']} layers, "
        f"d_model {summary['d_model']}, vocabularies {summary['source_vocab_size']}/"
        f"{summary['target_vocab_size']}) into {summary['run']}",
        "generation: " + json.dumps(generation),
    ]
    if generation.get("ignored"):
        lines.append(
            "note: generate() settings these searches do not apply, translations may differ "
            "from generate()'s: " + json.dumps(generation["ignored"])
        )
    for side, count in summary["unproduced_pieces"].items():
        if count:
            lines.append(
                f"note: {count} {side} vocabulary piece(s) are never produced by the "
                f"{side} SentencePiece model"
            )
    return "\n".join(lines)
