"""Training on local parallel files (the Multi30k layout) and evaluating BLEU.

    python examples/translate_multi30k.py DATA_DIR

DATA_DIR holds `train.en.gz`, `train.de.gz`, `val.*`, `test_2016_flickr.*`
(one sentence per line, gzipped or plain). The full run trains the `small` preset for
about 50 minutes on 2 CPU cores (see benchmarks/multi30k.sh for the
recorded setting); `KT_EXAMPLE_QUICK=1` trains a few steps on 2,000 pairs.
"""

import gzip
import os
import sys

from keras_transformer.data.sources import read_parallel_files
from keras_transformer.decoding import Translator, evaluate
from keras_transformer.training import RunDirectory, TrainConfig, load_run, train

QUICK = os.environ.get("KT_EXAMPLE_QUICK") == "1"
if len(sys.argv) != 2:
    sys.exit("usage: python examples/translate_multi30k.py DATA_DIR (the Multi30k folder)")
DATA = sys.argv[1]
OUT = os.environ.get("KT_EXAMPLE_DIR", "runs")


def path(name):
    for candidate in (os.path.join(DATA, name + ".gz"), os.path.join(DATA, name)):
        if os.path.exists(candidate):
            return candidate
    sys.exit(
        f"Multi30k file {name}(.gz) not found under {DATA}; pass the data directory as an argument"
    )


train_en, train_de = path("train.en"), path("train.de")
if QUICK:  # a 2,000-pair slice, written beside the run
    os.makedirs(OUT, exist_ok=True)
    src, tgt, _ = read_parallel_files(train_en, train_de)
    train_en, train_de = (
        os.path.join(OUT, "m30k_small.en.gz"),
        os.path.join(OUT, "m30k_small.de.gz"),
    )
    for file, lines in ((train_en, src[:2000]), (train_de, tgt[:2000])):
        with gzip.open(file, "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")

run = os.path.join(OUT, "multi30k")
# Run again, the script evaluates the trained run: `train` never trains into
# a finished one (a killed one, it resumes).
if RunDirectory(run).is_finished():
    print(f"{run} is trained")
else:
    train(
        TrainConfig(
            dataset=f"parallel:{train_en},{train_de}",
            valid=f"parallel:{path('val.en')},{path('val.de')}",
            output_dir=run,
            preset="small" if not QUICK else "tiny",
            model_overrides={}
            if not QUICK
            else {"num_layers": 1, "d_model": 64, "num_heads": 2, "dff": 128},
            epochs=20 if not QUICK else 1,
            steps_per_epoch=None if not QUICK else 10,
            batch_tokens=4096 if not QUICK else 1024,
            vocab_size=8000 if not QUICK else 500,
            warmup_steps=4000 if not QUICK else 20,
            max_length=64,
            verbose=2,
        )
    )
model, source_tokenizer, target_tokenizer, _ = load_run(run)
sources, references, _ = read_parallel_files(
    path("test_2016_flickr.en"), path("test_2016_flickr.de")
)
if QUICK:
    sources, references = sources[:20], references[:20]
translator = Translator(
    model, source_tokenizer, target_tokenizer, beam_size=4, max_output_length=64
)
scores, _ = evaluate(translator, sources, references)
print(scores.describe())
