"""A run as a Marian checkpoint in the Hugging Face format: the way back.

`export_marian(run_path, output_dir)` writes `config.json`,
`model.safetensors`, `generation_config.json`, the SentencePiece models
(`source.spm`, `target.spm`), `vocab.json` (and `target_vocab.json` with
separate vocabularies) and `tokenizer_config.json`, which
`MarianMTModel.from_pretrained` and `MarianTokenizer` load, and
CTranslate2's `ct2-transformers-converter` converts. Neither `transformers`
nor PyTorch is needed to write it.

Marian can express a post-norm Transformer with sinusoidal positions,
layer norm epsilon 1e-5 and a ReLU, GELU or SiLU feed-forward; any other
run is refused, naming what Marian lacks. A run whose sinusoidal table
interleaves sines and cosines (every run trained here) is written with its
model width permuted, sines first: the same function in Marian's layout.
Ids: this library's end token becomes Marian's 0 and its padding Marian's 3
(one padding id serves both vocabularies, as Marian's config has one);
unknown stays 1, and decoding starts from the start token, 2
(`decoder_start_token_id`).
"""

import json
import os

import numpy as np

from keras_transformer.interop import weight_tables
from keras_transformer.special_ids import END_ID, PAD_ID, START_ID, UNK_ID

# Our id of each Marian id: the end token and padding change places.
_SWAP = {END_ID: PAD_ID, PAD_ID: END_ID}
# A Keras activation's function name -> transformers' name for it (where
# several name one function, the one transformers' Marian writes).
ACTIVATIONS = {
    "relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "swish", "swish": "swish",
    "gelu_sigmoid": "quick_gelu", "tanh": "tanh", "sigmoid": "sigmoid", "relu6": "relu6",
    "mish": "mish", "hard_silu": "hardswish", "linear": "linear",
}  # fmt: skip


def marian_ids(vocab_size):
    """Our id of Marian id `m`, for `m` in `range(vocab_size)`."""
    return np.array([_SWAP.get(m, m) for m in range(vocab_size)])


def check_expressible(model):
    """Raises a `ValueError` naming what of `model` Marian cannot express."""
    from keras_transformer.layers import activations

    problems = []
    if model.norm_first:
        problems.append("pre-norm blocks (norm_first=True); Marian is post-norm")
    if model.position_encoding != "sinusoidal":
        problems.append(f"{model.position_encoding} positions; Marian's are sinusoidal")
    if abs(model.layer_norm_epsilon - 1e-5) > 1e-12:
        problems.append(f"layer_norm_epsilon={model.layer_norm_epsilon}; Marian's is 1e-5")
    activation = activations.get(model.activation)
    name = getattr(activation, "__name__", str(model.activation))
    if name not in ACTIVATIONS:
        problems.append(f"the activation {name!r}; Marian has {sorted(ACTIVATIONS)}")
    if problems:
        raise ValueError("Marian cannot express this run: " + "; ".join(problems))
    return ACTIVATIONS[name]


def _residual_order(model):
    """The permutation of the model width that puts the sinusoidal table in
    Marian's halves (the identity for a run that has them already)."""
    d = model.d_model
    if model.target_embedding.position_layout == "halves":
        return np.arange(d)
    return np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])


def marian_tensors(model):
    """The model's weights under Marian's names, ids and layout."""
    width = _residual_order(model)
    source_ids = marian_ids(model.source_vocab_size)
    target_ids = marian_ids(model.target_vocab_size)

    def array(variable):
        return np.asarray(variable, dtype=np.float32)

    tensors = {}
    source_table = array(model.source_embedding.embeddings)[source_ids][:, width]
    target_table = array(model.target_embedding.embeddings)[target_ids][:, width]
    if model.share_embeddings:
        tensors["model.shared.weight"] = source_table
    if not model.share_embeddings or model.output_projection is not None:
        # Shared but untied, transformers 5 ties nothing and each stack
        # reads its own table (older versions read `model.shared`).
        tensors["model.encoder.embed_tokens.weight"] = source_table
        tensors["model.decoder.embed_tokens.weight"] = target_table
    if model.output_projection is not None:
        kernel = array(model.output_projection.kernel)  # [d, vocab]
        tensors["lm_head.weight"] = kernel.T[target_ids][:, width]
        bias = array(model.output_projection.bias)[target_ids]
    elif model.logits_bias is not None:
        bias = array(model.logits_bias)[target_ids]
    else:
        bias = np.zeros([model.target_vocab_size], np.float32)
    tensors["final_logits_bias"] = bias[None, :]

    for row in weight_tables.marian_rows(model):
        tensors[row.theirs] = weight_tables.to_theirs(row, weight_tables.resolve(model, row.ours),
                                                      width)  # fmt: skip
    return {name: np.ascontiguousarray(value) for name, value in tensors.items()}


def _vocabulary(tokenizer):
    pieces = tokenizer.pieces()
    ids = marian_ids(len(pieces))
    vocab = {}
    for marian_id, ours in enumerate(ids):
        piece = pieces[ours]
        if piece in vocab:
            raise ValueError(f"The vocabulary names two ids {piece!r}; Marian's maps names to ids")
        vocab[piece] = marian_id
    if "<unk>" not in vocab or vocab["<unk>"] != UNK_ID:
        raise ValueError("Marian needs the unknown token named <unk>")
    return vocab


def _config(model, activation, generation):
    return {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "vocab_size": model.source_vocab_size,
        "decoder_vocab_size": model.target_vocab_size,
        "d_model": model.d_model,
        "encoder_layers": model.num_layers,
        "decoder_layers": model.num_decoder_layers,
        "encoder_attention_heads": model.num_heads,
        "decoder_attention_heads": model.decoder_num_heads,
        "encoder_ffn_dim": model.dff,
        "decoder_ffn_dim": model.decoder_dff,
        "activation_function": activation,
        "max_position_embeddings": model.max_length,
        "scale_embedding": bool(model.scale_embeddings),
        "share_encoder_decoder_embeddings": bool(model.share_embeddings),
        "tie_word_embeddings": model.output_projection is None,
        "dropout": float(model.dropout),
        "attention_dropout": float(
            model.dropout if model.attention_dropout is None else model.attention_dropout
        ),
        "activation_dropout": 0.0,
        "pad_token_id": END_ID,  # Marian id 3: our padding
        "eos_token_id": PAD_ID,  # Marian id 0: our end token
        "decoder_start_token_id": START_ID,
        "forced_eos_token_id": PAD_ID if generation.forced_end else None,
        "is_encoder_decoder": True,
    }


def _generation_config(generation, target_tokenizer):
    """`generation_config.json` of a `GenerationConfig`: what `generate()`
    has of it (the power length penalty; suppressed phrases and the
    unknown token as `bad_words_ids`, in Marian's ids)."""
    bad = [[END_ID]] + ([[UNK_ID]] if generation.disable_unk else [])
    for ids in generation.suppressed_ids(target_tokenizer):
        bad.append([_SWAP.get(i, i) for i in ids])
    config = {
        "num_beams": generation.beam_size,
        "max_length": generation.max_output_length + 1,  # with the start token
        "bad_words_ids": bad,
        "decoder_start_token_id": START_ID,
        "eos_token_id": PAD_ID,
        "pad_token_id": END_ID,
    }
    if generation.length_penalty == "power":
        config["length_penalty"] = generation.alpha
    if generation.forced_end:
        config["forced_eos_token_id"] = PAD_ID
    if generation.renormalize:
        config["renormalize_logits"] = True
    return config


def export_marian(model, source_tokenizer, target_tokenizer, output_dir, generation=None):
    """Writes `model` and its tokenizers as a Marian checkpoint folder.

    Args:
        model: a `Transformer` Marian can express (see `check_expressible`).
        source_tokenizer, target_tokenizer: the run's tokenizers.
        output_dir: the folder to write (must not exist).
        generation: a `GenerationConfig` (default: its defaults);
            `generate()` has the power length penalty only, so a run that
            decodes with GNMT's keeps `generate()`'s default there, and
            no sampling settings.

    Returns:
        `output_dir`.
    """
    from keras_transformer._extras import require
    from keras_transformer.decoding.generation_config import GenerationConfig

    numpy_io = require("safetensors.numpy", "huggingface")
    activation = check_expressible(model)
    if os.path.exists(output_dir):
        raise FileExistsError(f"{output_dir} exists; an export is never overwritten")
    generation = generation or GenerationConfig()
    shared = model.share_embeddings or (
        source_tokenizer.pieces() == target_tokenizer.pieces()
        and source_tokenizer.model_proto == target_tokenizer.model_proto
    )
    source_vocab = _vocabulary(source_tokenizer)
    target_vocab = _vocabulary(target_tokenizer)
    tensors = marian_tensors(model)
    os.makedirs(output_dir)
    numpy_io.save_file(tensors, os.path.join(output_dir, "model.safetensors"),
                       metadata={"format": "pt"})  # fmt: skip
    files = {
        "config.json": _config(model, activation, generation),
        "generation_config.json": _generation_config(generation, target_tokenizer),
        "tokenizer_config.json": {
            "separate_vocabs": not shared,
            "model_max_length": 512,
            "tokenizer_class": "MarianTokenizer",
        },  # fmt: skip
        "vocab.json": source_vocab,
    }
    if not shared:
        files["target_vocab.json"] = target_vocab
    for name, values in files.items():
        with open(os.path.join(output_dir, name), "w", encoding="utf-8") as f:
            json.dump(values, f, ensure_ascii=False, indent=1)
    for name, tokenizer in (("source.spm", source_tokenizer), ("target.spm", target_tokenizer)):
        with open(os.path.join(output_dir, name), "wb") as f:
            f.write(tokenizer.model_proto)
    return output_dir
