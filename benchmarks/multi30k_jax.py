"""Trains a Multi30k run on a GPU under the JAX backend, where TensorFlow is not.

The `train` command reads its corpus through tf.data and TensorFlow Text.
A GPU machine with JAX but without TensorFlow still trains the library's
`Transformer` the same way when the TensorFlow steps run beforehand:

1. Here, with TensorFlow: `prepare` writes a run directory exactly as
   `train` starts one (config, joint tokenizers, model config) and the
   framed training and validation examples that `train`'s pipeline makes
   (`pipeline.frame_examples`), as `examples.npz` in the run.

       python benchmarks/multi30k_jax.py prepare \\
         --config benchmarks/configs/multi30k_transformer_tiny.yaml \\
         --output-dir runs/tt_gpu [--overrides '{"epochs": 50}']

2. On the GPU machine, with `KERAS_BACKEND=jax` and no TensorFlow: `fit`
   trains it with `train`'s recipe (`recipe.compile_for_training`: Adam
   0.9/0.98/1e-9, the warmup schedule, label-smoothed masked loss) and its
   batching (`pipeline.batch_by_tokens`: buckets of similar length, about
   `batch_tokens` padded tokens each, padded here to the bucket's edge so
   that XLA compiles one program per bucket), keeps the last
   `average_last` epochs and writes `final`, `averaged` and `history.csv`
   into the run.

       KERAS_BACKEND=jax python benchmarks/multi30k_jax.py fit --run runs/tt_gpu

3. Here again: `keras-transformer evaluate --run runs/tt_gpu --weights
   averaged --beam-size 5 ...` decodes the test set with the in-graph beam
   search the export serves.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from keras_transformer.buckets import bucket_batch_sizes, bucket_edges


def prepare(args):
    """Run directory + framed examples, with `train`'s own code (TensorFlow)."""
    import yaml

    from keras_transformer.data import pipeline
    from keras_transformer.training import preparation, trainer
    from keras_transformer.training.config import TrainConfig
    from keras_transformer.training.run_directory import RunDirectory

    with open(args.config, encoding="utf-8") as f:
        values = yaml.safe_load(f)
    values.update(json.loads(args.overrides), output_dir=args.output_dir)
    config = TrainConfig.from_dict(values)
    run = RunDirectory(config.output_dir)
    os.makedirs(run.path, exist_ok=True)
    run.write_json(run.config, config.to_dict())
    data = preparation.prepare_data(config, run)
    source, target = data.source_tokenizer, data.target_tokenizer
    arrays = {}
    for split, pairs in (("train", data.train_pairs), ("valid", data.valid_pairs)):
        examples = pipeline.frame_examples(
            pairs, source, target, config.max_length, config.length_policy
        )
        rows = [tuple(np.asarray(x, np.int32) for x in row) for row in examples.as_numpy_iterator()]
        for i, name in enumerate(("context", "target_in", "target_out")):
            parts = [row[i] for row in rows]
            arrays[f"{split}_{name}"] = np.concatenate(parts)
            arrays[f"{split}_{name}_lengths"] = np.array([len(p) for p in parts], np.int32)
        print(f"{split}: {len(rows)} examples")
    np.savez_compressed(run.join("examples.npz"), **arrays)
    model = trainer.build_model(config, source.vocab_size, target.vocab_size)
    run.write_json(run.model_config, {**model.get_config(), "dtype": None})
    print(f"Wrote {run.path}")


def _split(arrays, split):
    """The examples of `split` as lists of `(context, target_in, target_out)`."""
    columns = []
    for name in ("context", "target_in", "target_out"):
        ends = np.cumsum(arrays[f"{split}_{name}_lengths"])
        columns.append(np.split(arrays[f"{split}_{name}"], ends[:-1]))
    return list(zip(*columns))


def batches(examples, batch_tokens, max_length, rng=None):
    """Token-budget batches, as `pipeline.batch_by_tokens`, padded to the
    bucket's edge. Forever, reshuffled each pass, with `rng`; else one pass."""
    edges = bucket_edges(max_length + 1)
    sizes = bucket_batch_sizes(edges, batch_tokens)

    def pack(rows, edge):
        out = np.zeros((3, len(rows), edge), np.int32)
        for i, row in enumerate(rows):
            for j, ids in enumerate(row):
                out[j, i, : len(ids)] = ids
        return (out[0], out[1]), out[2]

    while True:
        order = rng.permutation(len(examples)) if rng is not None else range(len(examples))
        pending = [[] for _ in edges]
        for index in order:
            row = examples[index]
            length = max(len(row[0]), len(row[1]))
            bucket = next(b for b, edge in enumerate(edges) if length <= edge)
            pending[bucket].append(row)
            if len(pending[bucket]) == sizes[bucket]:
                yield pack(pending[bucket], edges[bucket])
                pending[bucket] = []
        for bucket, rows in enumerate(pending):
            if rows:
                yield pack(rows, edges[bucket])
        if rng is None:
            return


def _Batches(items):
    """A list of batches that `fit` reads again at every validation."""
    import keras

    class Batches(keras.utils.PyDataset):
        def __len__(self):
            return len(items)

        def __getitem__(self, index):
            return items[index]

    return Batches()


def fit(args):
    """Trains the prepared run with `train`'s recipe under any Keras backend."""
    import keras

    from keras_transformer.losses import MaskedSparseCategoricalCrossentropy
    from keras_transformer.metrics import MaskedAccuracy
    from keras_transformer.models import Transformer
    from keras_transformer.optimizers import paper_adam

    def path(name):
        return os.path.join(args.run, name)

    with open(path("config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(path("model_config.json"), encoding="utf-8") as f:
        model_config = json.load(f)
    model_config.pop("dtype", None)
    arrays = np.load(path("examples.npz"))
    train, valid = _split(arrays, "train"), _split(arrays, "valid")
    keras.utils.set_random_seed(config["seed"])
    model = Transformer.from_config(model_config)
    model.build(((None, None), (None, None)))
    # recipe.compile_for_training's optimizer and loss; that module imports
    # TensorFlow (for tf.distribute), which this script must run without.
    model.compile(
        optimizer=paper_adam(
            model.d_model,
            config["warmup_steps"],
            config["lr_scale"],
            config["peak_learning_rate"],
        ),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=config["label_smoothing"]),
        metrics=[MaskedAccuracy()],
        jit_compile=True,
    )
    rng = np.random.default_rng(config["seed"])
    budget, max_length = config["batch_tokens"], config["max_length"]
    valid_batches = _Batches(list(batches(valid, budget, max_length)))
    epochs, keep = config["epochs"], config["average_last"] or 1
    kept = []

    class KeepLast(keras.callbacks.Callback):
        # In memory: the GPU machine's disk is not kept, only what it returns.
        def on_epoch_end(self, epoch, logs=None):
            if epoch >= epochs - keep:
                kept.append([np.array(w, np.float64) for w in self.model.get_weights()])

    start = time.time()
    model.fit(
        batches(train, budget, max_length, rng),
        steps_per_epoch=config["steps_per_epoch"],
        epochs=epochs,
        validation_data=valid_batches,
        validation_freq=args.validation_freq,
        callbacks=[KeepLast(), keras.callbacks.CSVLogger(path("history.csv"))],
        verbose=2,
    )
    seconds = time.time() - start
    # The model's weights alone: a Model's `save_weights` adds the optimizer's.
    inference = Transformer.from_config(model_config)
    inference.build(((None, None), (None, None)))
    last = model.get_weights()
    inference.set_weights(last)
    inference.save_weights(path("final.weights.h5"))
    model.set_weights([np.mean(ws, axis=0).astype(w.dtype) for w, *ws in zip(last, *kept)])
    inference.set_weights(model.get_weights())
    inference.save_weights(path("averaged.weights.h5"))
    scores = model.evaluate(valid_batches, verbose=0, return_dict=True)
    info = {
        "epochs": list(range(epochs - len(kept) + 1, epochs + 1)),
        "updates": int(model.optimizer.iterations.numpy()),
        "train_seconds": round(seconds, 1),
        "backend": keras.backend.backend(),
        **{f"val_{k}": float(v) for k, v in scores.items()},
    }
    with open(path("averaged.json"), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)
    print(json.dumps(info))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("prepare", help="write the run and its examples (needs TensorFlow)")
    p.add_argument("--config", required=True, help="a TrainConfig YAML file")
    p.add_argument("--output-dir", required=True, help="the run directory to write")
    p.add_argument("--overrides", default="{}", help="JSON of TrainConfig keys to change")
    f = commands.add_parser("fit", help="train a prepared run (any Keras backend)")
    f.add_argument("--run", required=True, help="a run directory written by prepare")
    f.add_argument("--validation-freq", type=int, default=10, help="validate every N epochs")
    args = parser.parse_args(argv)
    (prepare if args.command == "prepare" else fit)(args)


if __name__ == "__main__":
    sys.exit(main())
