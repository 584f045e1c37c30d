"""Runs the gRPC client against the real tensorflow_model_server when present."""

import shutil
import subprocess
import time

import pytest
import tensorflow as tf

from keras_transformer.decoding import Translator
from keras_transformer.export import export_version
from keras_transformer.serving.grpc_client import GrpcTranslationClient
from tests.processes import free_port

BINARY = shutil.which("tensorflow_model_server")


@pytest.mark.skipif(BINARY is None, reason="tensorflow_model_server is not on PATH")
def test_real_tf_serving_serves_the_export(trained_model, tmp_path):
    model, src, tgt = trained_model
    base = str(tmp_path / "translator")
    export_version(model, src, tgt, base, max_output_length=20, beam_size=2)
    port = free_port()
    server = subprocess.Popen(
        [BINARY, f"--port={port}", "--model_name=translator", f"--model_base_path={base}"]
    )
    try:
        sentences = ["The dog sleeps.", ""]
        expected = Translator(model, src, tgt, beam_size=2, max_output_length=20).translate(
            tf.constant(sentences)
        )
        deadline = time.time() + 120
        with GrpcTranslationClient(f"127.0.0.1:{port}", "translator") as client:
            while True:
                try:
                    result = client.translate(sentences)
                    break
                except Exception:
                    if time.time() > deadline:
                        raise
                    time.sleep(1)
        assert result["translation"] == [t.decode() for t in expected["translation"].numpy()]
    finally:
        server.terminate()
        server.wait(timeout=60)
