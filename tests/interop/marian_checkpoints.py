"""Tiny Marian checkpoints, built here with `transformers` (no download):
random weights, SentencePiece models trained on a few sentences, and the
vocabularies OPUS-MT folders carry."""

import io
import json
import os

import numpy as np

SOURCE_TEXT = [
    "A man rides a bicycle down the street.",
    "Two dogs play in the snow.",
    "A woman reads a book in the park.",
    "Children are running on the beach.",
    "The old man sells fruit at the market.",
    "A girl in a red dress is dancing.",
] * 8
TARGET_TEXT = [
    "Ein Mann fährt mit dem Fahrrad die Straße hinunter.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau liest ein Buch im Park.",
    "Kinder laufen am Strand.",
    "Der alte Mann verkauft Obst auf dem Markt.",
    "Ein Mädchen in einem roten Kleid tanzt.",
] * 8
# Text the tests tokenize and translate: unknown characters, an empty
# line, a language code, spacing, digits.
TEST_TEXT = [
    "A man rides a bicycle.",
    "",
    "Two dogs ✓ play in the snow ☃!",
    ">>deu<< A woman reads a book.",
    "  Children   are running.  ",
    "The old man sells 42 fruits at the market.",
    ">>fra<<",
    "x",
]
LANGUAGE_CODES = [">>deu<<", ">>fra<<"]
# A piece the SentencePiece models never produce (import reports it).
UNPRODUCED = "▁zzzqqq"


def _train_spm(sentences, vocab_size):
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=vocab_size,
        model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
        num_threads=1, minloglevel=2,
    )  # fmt: skip
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    return model.getvalue(), [p for p in pieces if p not in ("<unk>", "<s>", "</s>")]


def _marian_vocab(pieces):
    """Marian's layout: </s> 0, <unk> 1, the pieces, <pad> last."""
    ordered = ["</s>", "<unk>", *pieces]
    return {piece: i for i, piece in enumerate(ordered + ["<pad>"])}


def build_checkpoint(
    folder, shared=True, activation="swish", seed=0, d_model=32, layers=2, end_bias=6.0,
    num_beams=4, max_length=24, length_penalty=1.0, safetensors=True, init_std=0.5, bias_scale=0.2,
    renormalize=False, pad_bias=0.0, tied=True, heads=2, ffn_dim=None,
):  # fmt: skip
    """Writes a Marian folder as `save_pretrained` and `MarianTokenizer`
    write it; returns the folder. `layers`, `heads`, `ffn_dim` (by default
    `2 * d_model`): one value for both stacks, or `(encoder, decoder)`;
    `tied=False`: an output projection of its own
    (`tie_word_embeddings=false`)."""
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    os.makedirs(folder, exist_ok=True)
    source_proto, source_pieces = _train_spm(SOURCE_TEXT, 60)
    target_proto, target_pieces = _train_spm(TARGET_TEXT, 70)
    extra = [*LANGUAGE_CODES, UNPRODUCED]
    if shared:
        joint = sorted(set(source_pieces) | set(target_pieces)) + extra
        source_vocab = target_vocab = _marian_vocab(joint)
    else:
        # Separate vocabularies of different sizes; <pad> shares its id
        # (Marian's one pad_token_id), so the target one is filled up to it.
        source_vocab = _marian_vocab(source_pieces + extra)
        pad = len(source_vocab) - 1
        ordered = ["</s>", "<unk>", *target_pieces]
        ordered += [f"▁filler{i}" for i in range(pad - len(ordered))]
        ordered.insert(pad, "<pad>")
        ordered += [f"▁tail{i}" for i in range(3)]  # the target runs past it
        target_vocab = {piece: i for i, piece in enumerate(ordered)}
    pad = len(source_vocab) - 1

    def pair(value):
        return value if isinstance(value, tuple) else (value, value)

    encoder_layers, decoder_layers = pair(layers)
    encoder_heads, decoder_heads = pair(heads)
    encoder_ffn, decoder_ffn = pair(ffn_dim or 2 * d_model)
    config = MarianConfig(
        vocab_size=len(source_vocab), decoder_vocab_size=len(target_vocab), d_model=d_model,
        encoder_layers=encoder_layers, decoder_layers=decoder_layers,
        encoder_attention_heads=encoder_heads, decoder_attention_heads=decoder_heads,
        encoder_ffn_dim=encoder_ffn, decoder_ffn_dim=decoder_ffn,
        max_position_embeddings=64, pad_token_id=pad, eos_token_id=0,
        decoder_start_token_id=pad, forced_eos_token_id=0, activation_function=activation,
        scale_embedding=True, share_encoder_decoder_embeddings=shared, init_std=init_std,
        dropout=0.1, tie_word_embeddings=tied,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        generator = torch.Generator().manual_seed(seed)
        bias = torch.randn(model.final_logits_bias.shape, generator=generator) * bias_scale
        bias[0, 0] += end_bias  # translations end well before max_length
        bias[0, pad] += pad_bias  # the banned padding's share of each step
        model.final_logits_bias.copy_(bias)
    model.generation_config = GenerationConfig(
        num_beams=num_beams, max_length=max_length, bad_words_ids=[[pad]],
        decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0, pad_token_id=pad,
        length_penalty=length_penalty, **({"renormalize_logits": True} if renormalize else {}),
    )  # fmt: skip
    model.save_pretrained(folder, safe_serialization=True)
    if not safetensors:
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        torch.save(state, os.path.join(folder, "pytorch_model.bin"))
        os.remove(os.path.join(folder, "model.safetensors"))
    for name, proto in (("source.spm", source_proto), ("target.spm", target_proto)):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(proto)
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(source_vocab, f, ensure_ascii=False)
    tokenizer_config = {"separate_vocabs": not shared}
    if not shared:
        with open(os.path.join(folder, "target_vocab.json"), "w", encoding="utf-8") as f:
            json.dump(target_vocab, f, ensure_ascii=False)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config, f)
    return folder


def hf_tokenizer(folder):
    from transformers import MarianTokenizer

    separate = os.path.exists(os.path.join(folder, "target_vocab.json"))
    return MarianTokenizer(
        os.path.join(folder, "source.spm"), os.path.join(folder, "target.spm"),
        os.path.join(folder, "vocab.json"),
        target_vocab_file=os.path.join(folder, "target_vocab.json") if separate else None,
        separate_vocabs=separate,
    )  # fmt: skip


def hf_model(folder):
    from transformers import MarianMTModel

    return MarianMTModel.from_pretrained(folder).eval()


def hf_log_probs(model, tokenizer, sources, targets):
    """`transformers`' own teacher-forced scores: `(sums, lengths)`, the
    log-probability of every label of each row and how many labels it
    has, end token included."""
    import torch

    batch = tokenizer(sources, text_target=targets, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits
    labels = batch["labels"]
    picked = torch.gather(torch.log_softmax(logits, -1), -1, labels.clamp(min=0)[..., None])
    real = labels != model.config.pad_token_id
    return picked[..., 0].masked_fill(~real, 0.0).sum(-1).numpy(), real.sum(-1).numpy()


def as_numpy(tensor):
    return np.asarray(tensor.detach().cpu().numpy())
