"""Does a trained run's encoder keep source positions apart?

For each run, on the first `--sentences` pairs of a parallel corpus: the
encoder position similarity after the embedding and each encoder block,
and the normalized cross-attention entropy of each decoder block
(`keras_transformer.models.diagnostics`). A collapsed encoder shows
similarities near 1 and entropies near 1: the decoder then reads the
source as one vector, and translates it loosely.

    .venv/bin/python benchmarks/encoder_collapse.py RUN [RUN ...] \
        --source DATA/val.en.gz --target DATA/val.de.gz [--weights final] [--sentences 64]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from keras_transformer.data.pipeline import frame_examples  # noqa: E402
from keras_transformer.data.sources import read_parallel_files  # noqa: E402
from keras_transformer.models import (  # noqa: E402
    cross_attention_entropy,
    encoder_position_similarity,
)
from keras_transformer.training import load_run  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--weights", default="final")
    parser.add_argument(
        "--source", required=True, help="source sentences, e.g. Multi30k's val.en.gz"
    )
    parser.add_argument("--target", required=True, help="their references, e.g. val.de.gz")
    parser.add_argument("--sentences", type=int, default=64)
    args = parser.parse_args()
    source_lines, target_lines, _ = read_parallel_files(args.source, args.target)
    pairs = tf.data.Dataset.from_tensor_slices(
        (source_lines[: args.sentences], target_lines[: args.sentences])
    )
    for path in args.runs:
        model, source_tokenizer, target_tokenizer, _ = load_run(path, args.weights)
        # Framed as in training: source + end token, start token + target.
        framed = frame_examples(pairs, source_tokenizer, target_tokenizer, policy="truncate")
        context, target_in, _ = next(iter(framed.padded_batch(args.sentences)))
        similarity = encoder_position_similarity(model, context)
        entropy = cross_attention_entropy(model, context, target_in)
        print(f"{path} ({args.weights} weights, {int(context.shape[0])} sentences)")
        print("  encoder position similarity:", " ".join(f"{v:.3f}" for v in similarity))
        print("  cross-attention entropy:    ", " ".join(f"{v:.3f}" for v in entropy))


if __name__ == "__main__":
    main()
