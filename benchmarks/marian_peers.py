"""An OPUS-MT-sized Marian model: `transformers`, CTranslate2 and our exports.

One run builds a Marian checkpoint of OPUS-MT's shape (6+6 layers,
`d_model` 512, 8 heads, feed-forward 2048, SiLU, one shared 58,000-piece
vocabulary; random weights, the end token's logit at -10,000 so that every
engine generates exactly `--tokens` tokens; SentencePiece models learned
from Multi30k), then on those same weights and the same Multi30k test
sentences times:

- `transformers`' `generate()` (PyTorch, the path users take today), with
  `MarianTokenizer` before and `batch_decode` after;
- CTranslate2 float32 from its own converter (`ct2-transformers-converter`),
  SentencePiece before and after, in a process without TensorFlow;
- our plain and `--jit-compile` exports of the imported run
  (`serving_default` and `translate_greedy` in TensorFlow's session, as TF
  Serving runs them); the compiled one twice: as exported by default (a
  batch runs as two programs, one per half, for two inter-op threads) and
  with `--no-split-batches` (one program a batch, the export for a server
  of one thread a request).

Beam 4 and greedy, batches of 1 and 32, at each of `--threads` (PyTorch's
`set_num_threads`, CTranslate2's `intra_threads`, TensorFlow's intra- and
inter-op pools); each engine in a process of its own, taking turns as in
`decode_peers.py`. It also records the import's time and peak memory.

    .venv/bin/pip install -e '.[benchmark]'
    .venv/bin/python benchmarks/marian_peers.py --data DIR [--repeats 3] [--threads 1,2]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from multi30k_data import add_data_argument

HERE = os.path.dirname(os.path.abspath(__file__))
LAYERS, D_MODEL, HEADS, DFF, VOCAB = 6, 512, 8, 2048, 58_000
CASES = (("beam4", 4, 1), ("greedy", 1, 1), ("beam4", 4, 32), ("greedy", 1, 32))
BEAMS = {name: beams for name, beams, _ in CASES}
ENGINES = ("transformers", "ct2 float32", "plain", "xla", "xla one program")


def _lines(path, limit=None):
    import gzip

    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    return lines[:limit]


def build(data_dir, base, tokens):
    """Writes the checkpoint, converts it for CTranslate2, imports and
    exports it; returns the paths, the sentences and the import's cost."""
    import io

    import sentencepiece as spm
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    text = {lang: _lines(os.path.join(data_dir, f"train.{lang}.gz")) for lang in ("en", "de")}
    folder = os.path.join(base, "opus-mt-shaped")
    os.makedirs(folder)
    pieces = []
    for lang, name in (("en", "source.spm"), ("de", "target.spm")):
        proto = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(text[lang]), model_writer=proto, vocab_size=8000,
            model_type="unigram", character_coverage=1.0, minloglevel=2, num_threads=2,
            hard_vocab_limit=False,
        )  # fmt: skip
        with open(os.path.join(folder, name), "wb") as f:
            f.write(proto.getvalue())
        processor = spm.SentencePieceProcessor(model_proto=proto.getvalue())
        pieces += [processor.id_to_piece(i) for i in range(3, processor.get_piece_size())]
    pieces = sorted(set(pieces))
    # OPUS-MT's joint vocabularies hold pieces of both languages and more:
    # fill up to its size.
    pieces += [f"▁filler{i}" for i in range(VOCAB - 3 - len(pieces))]
    vocab = {"</s>": 0, "<unk>": 1, **{p: i + 2 for i, p in enumerate(pieces)}}
    vocab["<pad>"] = len(vocab)
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    pad = vocab["<pad>"]
    config = MarianConfig(
        vocab_size=len(vocab), d_model=D_MODEL, encoder_layers=LAYERS, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=DFF,
        decoder_ffn_dim=DFF, activation_function="swish", scale_embedding=True,
        max_position_embeddings=512, pad_token_id=pad, eos_token_id=0,
        decoder_start_token_id=pad, forced_eos_token_id=None,
    )  # fmt: skip
    torch.manual_seed(0)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias[0, 0] = -1e4  # no end token: fixed work
    model.generation_config = GenerationConfig(
        num_beams=4, max_length=tokens + 1, bad_words_ids=[[pad]], decoder_start_token_id=pad,
        eos_token_id=0, pad_token_id=pad,
    )  # fmt: skip
    model.save_pretrained(folder)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"separate_vocabs": False}, f)
    del model
    paths = {"transformers": folder}
    ct2 = os.path.join(base, "ct2")
    # ct2-transformers-converter, from this interpreter's environment.
    subprocess.run([sys.executable, "-m", "ctranslate2.converters.transformers", "--model", folder,
                    "--output_dir", ct2], check=True, capture_output=True)  # fmt: skip
    for name in ("source.spm", "target.spm"):
        shutil.copy(os.path.join(folder, name), ct2)
    paths["ct2 float32"] = ct2
    cost = json.loads(
        subprocess.run(
            [sys.executable, "-c", _IMPORT, folder, os.path.join(base, "run")],
            check=True, capture_output=True, text=True,
        ).stdout.splitlines()[-1]
    )  # fmt: skip
    from keras_transformer.export import export_run

    run = os.path.join(base, "run")
    common = dict(max_output_length=tokens, beam_size=4, forced_end=False, check=False,
                  max_input_length=48)  # fmt: skip
    paths["plain"] = export_run(run, os.path.join(base, "plain"), **common)
    for engine, split in (("xla", True), ("xla one program", False)):
        paths[engine] = export_run(run, os.path.join(base, engine.replace(" ", "_")), **common,
                                   jit_compile=True, batch_sizes=[1, 32], lengths=[48],
                                   split_batches=split)  # fmt: skip
    sentences = _lines(os.path.join(data_dir, "test_2016_flickr.en.gz"), 32)
    return paths, sentences, cost


_IMPORT = """
import json, resource, sys, time
start = time.perf_counter()
from keras_transformer.interop.marian import import_marian
import_marian(sys.argv[1], sys.argv[2])
print(json.dumps({"seconds": time.perf_counter() - start,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _hf_request(folder, threads, tokens):
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    torch.set_num_threads(threads)
    tokenizer = MarianTokenizer(os.path.join(folder, "source.spm"),
                                os.path.join(folder, "target.spm"),
                                os.path.join(folder, "vocab.json"))  # fmt: skip
    model = MarianMTModel.from_pretrained(folder).eval()

    def request(name, sentences):
        batch = tokenizer(sentences, padding=True, return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(**batch, num_beams=BEAMS[name], max_new_tokens=tokens)
        assert out.shape[1] == tokens + 1, "the end token came early"
        return tokenizer.batch_decode(out, skip_special_tokens=True)

    return request


def _ct2_request(model_dir, threads, tokens):
    import ctranslate2
    import sentencepiece

    assert "tensorflow" not in sys.modules
    source = sentencepiece.SentencePieceProcessor(model_file=os.path.join(model_dir, "source.spm"))
    target = sentencepiece.SentencePieceProcessor(model_file=os.path.join(model_dir, "target.spm"))
    translator = ctranslate2.Translator(model_dir, inter_threads=1, intra_threads=threads)

    def request(name, sentences):
        pieces = [p + ["</s>"] for p in source.encode(sentences, out_type=str)]
        out = translator.translate_batch(pieces, beam_size=BEAMS[name],
                                         max_decoding_length=tokens,
                                         max_batch_size=len(sentences))  # fmt: skip
        return [target.decode(r.hypotheses[0]) for r in out]

    return request


def _savedmodel_request(path, threads, tokens):
    import numpy as np
    from decode_latency import SIGNATURES, open_session

    served = open_session(path, [threads, threads])
    signatures = dict(SIGNATURES)

    def request(name, sentences):
        text = np.array([s.encode() for s in sentences], dtype=object)
        return served.run(signatures[name], {"text": text})

    return request


def serve(engine, path, sentences, threads, tokens):
    """A worker: loads `engine`, prints READY, then times the requests
    ("NAME BATCH COUNT") that stdin asks for."""
    from decode_peers import _times_ms

    make = {"transformers": _hf_request, "ct2 float32": _ct2_request}.get(
        engine, _savedmodel_request
    )
    request = make(path, threads, tokens)
    print("READY", flush=True)
    for line in sys.stdin:
        name, batch, _, count = line.split()
        times = _times_ms(lambda: request(name, sentences[: int(batch)]), int(count))
        print("TIMES " + json.dumps(times), flush=True)


_WORKER = """
import json, sys
sys.path[:0] = json.loads(sys.argv[1])
import marian_peers
marian_peers.serve(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), int(sys.argv[5]),
                   int(sys.argv[6]))
"""


def _worker(engine, path, sentences, threads, tokens):
    from decode_peers import Worker

    return Worker(engine, path, sentences, threads, script=_WORKER, extra=(str(tokens),))


def measure(paths, sentences, threads, repeats, tokens):
    from decode_peers import take_turns

    workers = {}
    try:
        for engine in ENGINES:
            workers[engine] = _worker(engine, paths[engine], sentences, threads, tokens)
        requests = [(name, batch, tokens) for name, _, batch in CASES]
        times = take_turns(workers, requests, repeats)
    finally:
        for worker in workers.values():
            worker.close()
    return {e: {f"{r[0]} {r[1]}": statistics.median(times[e, r]) for r in requests}
            for e in ENGINES}  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=32, help="tokens generated per sentence")
    parser.add_argument(
        "--threads", default=f"1,{os.cpu_count()}",
        help="thread counts, comma-separated (default: 1 and the CPUs)",
    )  # fmt: skip
    add_data_argument(parser)
    args = parser.parse_args()
    threads = sorted({int(t) for t in args.threads.split(",")})
    sys.path.insert(0, HERE)
    from decode_latency import in_fresh_process

    base = tempfile.mkdtemp()
    try:
        paths, sentences, cost = in_fresh_process("marian_peers", "build", args.data, base,
                                                  args.tokens)  # fmt: skip
        print(f"import: {cost['seconds']:.1f} s, peak memory {cost['peak_rss_mib']:.0f} MiB",
              flush=True)  # fmt: skip
        results = {t: measure(paths, sentences, t, args.repeats, args.tokens) for t in threads}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    for t, ms in results.items():
        print(f"\nthreads {t}; {args.tokens} tokens per sentence; median of {args.repeats} (ms)")
        print("| case | transformers | CT2 float32 | plain | XLA | XLA one program "
              "| best XLA vs transformers | best XLA / CT2 |")  # fmt: skip
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, _, batch in CASES:
            key = f"{name} {batch}"
            hf, ct2, plain, xla, whole = (ms[e][key] for e in ENGINES)
            best = min(xla, whole)
            print(f"| {name}, batch {batch} | {hf:.0f} | {ct2:.0f} | {plain:.0f} | {xla:.0f} "
                  f"| {whole:.0f} | {hf / best:.2f}x | {best / ct2:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
