"""A small keras-tuner search over the Transformer on the synthetic task.

Random search over layers, width, heads, dropout and warmup (ranges), and
batch tokens, scored by validation masked accuracy; the best
hyperparameters are printed and saved as JSON. About 5 minutes on 2 CPU
cores; `KT_EXAMPLE_QUICK=1` runs 1 tiny trial. The same search runs on
several machines with keras-tuner's KERASTUNER_* environment variables
(see the README).
"""

import os

from keras_transformer.tuning.search import run_search

QUICK = os.environ.get("KT_EXAMPLE_QUICK") == "1"
OUT = os.environ.get("KT_EXAMPLE_DIR", "runs")

best = run_search(
    {
        "dataset": "synthetic",
        "data_dir": os.path.join(OUT, "tfds"),
        "directory": os.path.join(OUT, "tune_example"),
        "tuner": "random",
        "max_trials": 6 if not QUICK else 1,
        "epochs": 2 if not QUICK else 1,
        "steps_per_epoch": 100 if not QUICK else 3,
        "vocab_size": 1000 if not QUICK else 300,
        "tokenizer_sample": 20_000 if not QUICK else 3_000,
        "max_length": 64,
        "space": {
            "num_layers": [1, 2],
            "d_model": [64, 128] if not QUICK else [16, 32],
            "num_heads": [2, 4],
            "dff": [256] if not QUICK else [32],
            "dropout": {"min": 0.0, "max": 0.2, "step": 0.1},  # a range: hp.Float
            "warmup_steps": {"min": 100, "max": 400, "sampling": "log"},  # hp.Int
            "batch_tokens": [1024, 2048],
        },
    }
)
print("best:", best.values)
