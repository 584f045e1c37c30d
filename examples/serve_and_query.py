"""Export a trained run, serve it over TF Serving's gRPC API, and query it.

    python examples/serve_and_query.py [RUN_DIR]

Uses `runs/demo` (from `make demo`) by default; without a run it trains a
tiny one first (1 minute). Exports a new version under exports/example,
starts `keras-transformer serve` on a free loopback port, and translates
through the gRPC client: the same client works against the official
`tensorflow/serving` image (serving/docker-compose.yml).
"""

import os
import socket
import subprocess
import sys

from keras_transformer.export import export_run
from keras_transformer.serving.grpc_client import GrpcTranslationClient

OUT = os.environ.get("KT_EXAMPLE_DIR", "runs")
run = sys.argv[1] if len(sys.argv) > 1 else "runs/demo"
if not os.path.exists(os.path.join(run, "model_config.json")):
    from keras_transformer.training import TrainConfig, train

    run = os.path.join(OUT, "serve_example_run")
    train(
        TrainConfig(
            dataset="synthetic",
            data_dir=os.path.join(OUT, "tfds"),
            output_dir=run,
            preset="tiny",
            model_overrides={"num_layers": 1, "d_model": 64, "num_heads": 2, "dff": 128},
            epochs=1,
            steps_per_epoch=30,
            batch_tokens=1024,
            vocab_size=300,
            tokenizer_sample=5000,
            max_length=64,
            verbose=2,
        )
    )

base = os.path.join(OUT, "exports_example", "translator")
version = export_run(run, base, max_output_length=64)
print("exported", version)

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
server = subprocess.Popen(
    [
        sys.executable,
        "-m",
        "keras_transformer.cli",
        "serve",
        "--model-base-path",
        base,
        "--model-name",
        "translator",
        "--port",
        str(port),
    ],
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
)
try:
    for line in server.stdout:
        if line.startswith("READY"):
            break
    with GrpcTranslationClient(f"127.0.0.1:{port}", "translator") as client:
        print("status:", client.status())
        result = client.translate(["The dog sleeps.", "The children laugh because the cat runs."])
        for translation, score in zip(result["translation"], result["score"]):
            print(f"{translation}  (score {score:.3f})")
        nbest = client.translate(["The dog sleeps."], signature="translate_nbest")
        print("n-best:", nbest["translations"][0])
finally:
    server.terminate()
    server.wait()
