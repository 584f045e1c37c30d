"""`make demo`: the main job end to end, offline, on the synthetic task.

1. prepares the synthetic English -> German-like dataset (a TFDS builder),
2. trains the `tiny` preset with `model.fit` on the CPU (about 7 minutes
   on 2 cores; set KT_DEMO_STEPS to change the step budget),
3. reports sacreBLEU on the synthetic test split with beam search,
4. exports a SavedModel with the tokenizers and beam search inside,
5. serves it over TF Serving's gRPC API and translates through the client.
"""

import os
import shutil
import time

RUN = "runs/demo"
EXPORTS = "exports/demo"
TFDS = "runs/tfds"
EXAMPLES = [
    "The dog sleeps.",
    "A tired teacher gives the red book to the children.",
    "The woman knows that the young man sees the cat in the garden.",
    "The girls laugh because a small bird follows the old women.",
]


def main():
    from keras_transformer.data import sources
    from keras_transformer.decoding import Translator, evaluate
    from keras_transformer.export import export_version
    from keras_transformer.serving.grpc_client import GrpcTranslationClient
    from keras_transformer.serving.server import start_server
    from keras_transformer.training import TrainConfig, load_run, train

    steps = int(os.environ.get("KT_DEMO_STEPS", "1500"))
    for path in (RUN, EXPORTS):
        shutil.rmtree(path, ignore_errors=True)
    started = time.time()
    config = TrainConfig(
        dataset="synthetic",
        data_dir=TFDS,
        output_dir=RUN,
        preset="tiny",
        model_overrides={"dropout": 0.0},  # the task is noise-free
        epochs=max(1, steps // 250),
        steps_per_epoch=min(250, steps),
        batch_tokens=4096,
        max_length=96,
        vocab_size=1000,
        tokenizer_sample=60_000,
        warmup_steps=400,
        lr_scale=2.0,
        checkpoint_every=250,
        verbose=2,
    )
    train(config)
    print(f"\nTrained in {time.time() - started:.0f} s")

    model, source_tok, target_tok, _ = load_run(RUN)
    translator = Translator(model, source_tok, target_tok, beam_size=4, max_output_length=96)
    test, _ = sources.load_dataset("synthetic", "test", TFDS)
    test_sources, references = sources.sentences(test)
    scores, _ = evaluate(translator, test_sources, references, batch_size=100)
    print("\nSynthetic test split, beam 4:\n" + scores.describe())

    version_dir = export_version(model, source_tok, target_tok, EXPORTS, max_output_length=96)
    print(f"\nExported {version_dir}")
    server, port, manager = start_server(EXPORTS, "translator", port=0)
    try:
        with GrpcTranslationClient(f"127.0.0.1:{port}", "translator") as client:
            result = client.translate(EXAMPLES)
            print(f"\nServed over gRPC on 127.0.0.1:{port} (version {result['version']}):")
            for source, target in zip(EXAMPLES, result["translation"]):
                print(f"  {source}\n    -> {target}")
    finally:
        server.stop(0)
        manager.stop()
    print(f"\nDone in {time.time() - started:.0f} s; BLEU {scores.bleu:.1f}")


if __name__ == "__main__":
    main()
