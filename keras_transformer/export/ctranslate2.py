"""A run as a CTranslate2 model: OpenNMT's inference engine, outside TF Serving.

CTranslate2 runs a standard Transformer with its own kernels (fused
projections, int8 weights, its own beam search), the fastest CPU path the
field uses. `export_ctranslate2` maps a `Transformer` onto CTranslate2's
`TransformerSpec` exactly: the self-attention query, key and value (and
the cross-attention key and value) fused as CTranslate2 stores them,
kernels in its `[out, in]` layout, the model's own position table (the
interleaved sines and cosines of the paper; CTranslate2's built-in table
differs), its layer-norm epsilon and embedding scale, pre- or post-norm,
shared or separate embeddings. The vocabularies are the SentencePiece
pieces, so ids are the same; the SentencePiece models are copied beside
them for tokenization.

CTranslate2's search differs from `keras_transformer.decoding` in its
length penalty, `length ** length_penalty` against GNMT's `((5 + length) /
6) ** alpha` here; rescore its n-best with the `score` signature (or
`Translator.score`) to rank them as ours does. Greedy search is the same.

Threads: CTranslate2's float32 gains from every core of a small machine;
give int8 `intra_threads=1` there (on a 2-vCPU machine it ran 8-9x slower
with two threads than with one; `benchmarks/decode_peers.py` times both).

Example (serve it from a process without TensorFlow: loaded, TensorFlow
slows CTranslate2's float32 path several times):

>>> model_dir = export_ctranslate2(model, source_tokenizer, target_tokenizer, f"{tmp_dir}/ct2")
>>> import ctranslate2, sentencepiece
>>> translator = ctranslate2.Translator(model_dir, inter_threads=1, intra_threads=2)
>>> sp = sentencepiece.SentencePieceProcessor(model_file=f"{model_dir}/source.model")
>>> result = translator.translate_batch([sp.encode("The dog sleeps.", out_type=str)])
>>> pieces = result[0].hypotheses[0]  # target pieces: decode with target.model
>>> isinstance(pieces, list)
True
"""

import os
import typing

import numpy as np

from keras_transformer._extras import require
from keras_transformer.interop import weight_tables
from keras_transformer.special_ids import END_ID, START_ID, UNK_ID

# CTranslate2's weight types (`--quantization`); numpy alone is imported
# here, so that the command line reads them before loading TensorFlow.
QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "bfloat16")


def _array(tensor):
    return np.asarray(tensor, dtype=np.float32)


class Row(typing.NamedTuple):
    """One weight of CTranslate2's spec and the sublayers of ours it holds."""

    ours: tuple  # our weights' paths without `_kernel`/`_bias` (fused in order),
    # or a layer norm's
    theirs: str  # the spec's path (`encoder.layer.0.self_attention.linear.0`)
    transform: str  # "linear", "heads_linear" or "norm"


def ctranslate2_rows(model):
    """The table of a `Transformer` in CTranslate2's `TransformerSpec`: the
    blocks' projections (the self-attention's query, key and value fused,
    the cross-attention's key and value), norms and feed-forward layers;
    the embeddings and the output projection are `transformer_spec`'s."""
    rows = []
    for stack in ("encoder", "decoder"):
        for i, block in enumerate(weight_tables.resolve(model, stack).blocks):
            ours, theirs = f"{stack}.blocks.{i}.", f"{stack}.layer.{i}."
            self_attention = ours + "self_attention."
            rows += [
                Row(tuple(self_attention + p for p in ("query", "key", "value")),
                    theirs + "self_attention.linear.0", "linear"),
                Row((self_attention + "output",), theirs + "self_attention.linear.1",
                    "heads_linear"),
                Row((ours + "self_attention_norm",), theirs + "self_attention.layer_norm", "norm"),
            ]  # fmt: skip
            if getattr(block, "cross_attention", None) is not None:
                cross = ours + "cross_attention."
                rows += [
                    Row((cross + "query",), theirs + "attention.linear.0", "linear"),
                    Row((cross + "key", cross + "value"), theirs + "attention.linear.1",
                        "linear"),
                    Row((cross + "output",), theirs + "attention.linear.2", "heads_linear"),
                    Row((ours + "cross_attention_norm",), theirs + "attention.layer_norm", "norm"),
                ]  # fmt: skip
            rows += [
                Row((ours + "feed_forward.intermediate",), theirs + "ffn.linear_0", "linear"),
                Row((ours + "feed_forward.output",), theirs + "ffn.linear_1", "linear"),
                Row((ours + "feed_forward_norm",), theirs + "ffn.layer_norm", "norm"),
            ]
        if model.norm_first:
            rows.append(Row((f"{stack}.final_norm",), f"{stack}.layer_norm", "norm"))
    return rows


def _set(spec, row, model):
    """Writes the weights of `row` (ours, read from `model`) into `spec`."""
    if row.transform == "norm":
        (norm,) = [weight_tables.resolve(model, path) for path in row.ours]
        spec.gamma, spec.beta = _array(norm.gamma), _array(norm.beta)
        return
    kernels = [_array(weight_tables.resolve(model, f"{p}_kernel")) for p in row.ours]
    biases = [_array(weight_tables.resolve(model, f"{p}_bias")) for p in row.ours]
    if row.transform == "heads_linear":
        # The attention output's kernel `[heads, head_dim, d_model]` contracts two axes.
        (kernel,) = kernels
        spec.weight = kernel.reshape(-1, kernel.shape[-1]).T
    else:  # kernels `[in, ...out]`, fused along their outputs in the `[out, in]` layout
        spec.weight = np.concatenate([k.reshape(k.shape[0], -1).T for k in kernels])
    spec.bias = np.concatenate([b.reshape(-1) for b in biases])


def _embeddings(stack_spec, embedding):
    # The encoder's spec holds a list of embeddings (one per source feature).
    tables = stack_spec.embeddings
    (tables[0] if isinstance(tables, list) else tables).weight = _array(embedding.embeddings)
    stack_spec.scale_embeddings = bool(embedding.scale_embeddings)
    if embedding.position_encoding == "learned":
        table = embedding.position_embedding.embeddings
    else:
        table = embedding.encoding_table
    stack_spec.position_encodings.encodings = _array(table)


def _activation(model):
    common_spec = require("ctranslate2.specs.common_spec", "ctranslate2")
    from keras_transformer.layers import activations

    function = activations.get(model.activation)
    name = getattr(function, "__name__", repr(function))
    supported = {
        "relu": common_spec.Activation.RELU,
        "gelu": common_spec.Activation.GELU,
        "gelu_tanh": common_spec.Activation.GELUTanh,
        "gelu_sigmoid": common_spec.Activation.GELUSigmoid,
        "silu": common_spec.Activation.SWISH,
        "swish": common_spec.Activation.SWISH,
        "tanh": common_spec.Activation.Tanh,
        "sigmoid": common_spec.Activation.Sigmoid,
    }
    if name not in supported:
        raise ValueError(f"CTranslate2 has no activation {name!r}; supported: {sorted(supported)}")
    return supported[name]


def transformer_spec(model, source_pieces, target_pieces):
    """The `ctranslate2.specs.TransformerSpec` of a `Transformer`.

    Args:
        model: a built `keras_transformer.models.Transformer`.
        source_pieces, target_pieces: the vocabularies, piece `i` being id
            `i` (`SubwordTokenizer.pieces()`).

    Returns:
        The spec, with vocabularies and configuration, ready to save.
    """
    specs = require("ctranslate2.specs", "ctranslate2")
    activation = _activation(model)
    # The stacks' specs apart: each has its own depth and heads.
    spec = specs.TransformerSpec(
        specs.TransformerEncoderSpec(
            model.num_layers, model.num_heads, pre_norm=model.norm_first, activation=activation
        ),
        specs.TransformerDecoderSpec(
            model.num_decoder_layers,
            model.decoder_num_heads,
            pre_norm=model.norm_first,
            activation=activation,
        ),
    )
    spec.config.layer_norm_epsilon = float(model.layer_norm_epsilon)
    # Our sources end with the end token and have no start token.
    spec.config.add_source_bos = False
    spec.config.add_source_eos = True
    spec.config.bos_token = target_pieces[START_ID]
    spec.config.eos_token = target_pieces[END_ID]
    spec.config.unk_token = target_pieces[UNK_ID]
    encoder, decoder = spec.encoder, spec.decoder

    _embeddings(encoder, model.source_embedding)
    _embeddings(decoder, model.target_embedding)
    for row in ctranslate2_rows(model):
        _set(weight_tables.resolve(spec, row.theirs), row, model)
    if model.output_projection is not None:
        decoder.projection.weight = _array(model.output_projection.kernel).T
        decoder.projection.bias = _array(model.output_projection.bias)
    else:  # tied: the output projection is the embedding matrix
        decoder.projection.weight = _array(model.target_embedding.embeddings)
        bias = model.logits_bias
        decoder.projection.bias = (
            _array(bias) if bias is not None else np.zeros([model.target_vocab_size], np.float32)
        )

    spec.register_source_vocabulary(list(source_pieces))
    spec.register_target_vocabulary(list(target_pieces))
    return spec


def export_ctranslate2(model, source_tokenizer, target_tokenizer, output_dir, quantization=None):
    """Writes a CTranslate2 model directory.

    It holds CTranslate2's `model.bin`, `config.json`, the vocabularies
    (`source_vocabulary.json`, `target_vocabulary.json`) and the
    SentencePiece models (`source.model`, `target.model`) to tokenize with.

    Args:
        model: a trained `Transformer`.
        source_tokenizer, target_tokenizer: the run's `SubwordTokenizer`s.
        output_dir: where to write (must not exist).
        quantization: `None` (float32) or one of `QUANTIZATIONS`
            (CTranslate2's weight types; `"int8"` is its fast CPU path).

    Returns:
        `output_dir`.
    """
    converters = require("ctranslate2.converters", "ctranslate2")
    if quantization in (None, "none", "float32"):
        quantization = None
    elif quantization not in QUANTIZATIONS:
        raise ValueError(
            f"`quantization` must be None or one of {QUANTIZATIONS}. "
            f"Received: quantization={quantization!r}"
        )
    if os.path.exists(output_dir):
        raise FileExistsError(f"{output_dir} exists; an export is never overwritten")
    spec = transformer_spec(model, source_tokenizer.pieces(), target_tokenizer.pieces())

    class _SpecConverter(converters.Converter):
        def _load(self):
            return spec

    _SpecConverter().convert(output_dir, quantization=quantization)
    for name, tokenizer in (("source", source_tokenizer), ("target", target_tokenizer)):
        with open(os.path.join(output_dir, f"{name}.model"), "wb") as f:
            f.write(tokenizer.model_proto)
    return output_dir
