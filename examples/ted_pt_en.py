"""The classic TFDS dataset `ted_hrlr_translate/pt_to_en`, by name.

    python examples/ted_pt_en.py

Downloads the TED talks Portuguese -> English corpus through
tensorflow-datasets (this needs the internet), trains the `small` preset
and reports BLEU. Offline, it says so and exits cleanly. About an hour on
2 CPU cores; minutes on a GPU.
"""

import os
import sys

DATASET = "tfds:ted_hrlr_translate/pt_to_en"
OUT = os.environ.get("KT_EXAMPLE_DIR", "runs")


def prepare():
    """Downloads and prepares the dataset; False when offline."""
    if os.environ.get("KT_OFFLINE") == "1":  # tests: no network attempt at all
        return False
    import tensorflow_datasets as tfds

    try:
        tfds.builder(
            DATASET.split(":", 1)[1], data_dir=os.path.join(OUT, "tfds")
        ).download_and_prepare()
        return True
    except Exception as error:  # no route, DNS failure, refused download...
        print(f"Download failed: {type(error).__name__}: {str(error)[:200]}")
        return False


if not prepare():
    print(f"{DATASET} needs the internet to download, and this machine is offline; nothing to do.")
    sys.exit(0)

from keras_transformer.data import sources  # noqa: E402
from keras_transformer.decoding import Translator, evaluate  # noqa: E402
from keras_transformer.training import RunDirectory, TrainConfig, load_run, train  # noqa: E402

run = os.path.join(OUT, "ted_pt_en")
# Run again, the script evaluates the trained run: `train` never trains into
# a finished one (a killed one, it resumes).
if RunDirectory(run).is_finished():
    print(f"{run} is trained")
else:
    train(
        TrainConfig(
            dataset=DATASET,
            output_dir=run,
            preset="small",
            epochs=10,
            vocab_size=8000,
            data_dir=os.path.join(OUT, "tfds"),
            verbose=2,
        )
    )
model, source_tokenizer, target_tokenizer, _ = load_run(run)
test, _ = sources.load_dataset(DATASET, "test", os.path.join(OUT, "tfds"))
test_sources, references = sources.sentences(test)
scores, _ = evaluate(
    Translator(model, source_tokenizer, target_tokenizer), test_sources, references
)
print(scores.describe())
