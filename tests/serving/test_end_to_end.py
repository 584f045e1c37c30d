"""The deployed path through the command line: export, serve, query, swap."""

import os

import numpy as np

from keras_transformer import cli
from keras_transformer.serving.grpc_client import GrpcTranslationClient
from tests.processes import run_python, start_serve
from tests.serving.conftest import copy_version, wait_for_status

SENTENCES = ["The dog sleeps.", "A young woman reads the book because the children laugh."]


def _cli(*args, **kwargs):
    return run_python("-m", "keras_transformer.cli", *args, timeout=600, **kwargs)


def test_train_export_serve_query_and_swap(trained_run, tmp_path):
    base = str(tmp_path / "exports" / "translator")
    result = _cli(
        "export", "--run", trained_run["run"], "--export-base", base, "--max-output-length", "24"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith(os.path.join("translator", "1"))

    plot = str(tmp_path / "attention.png")
    local = _cli("translate", "--model", base, "--plot-attention", plot, *SENTENCES)
    assert local.returncode == 0, local.stderr[-3000:]
    with open(plot, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    in_process = local.stdout.splitlines()
    assert len(in_process) == 2

    # Warmup is tested on its own (tests/serving/test_hostile_clients.py).
    server, port = start_serve(base, "--poll-seconds", "0.5", "--no-enable-model-warmup")
    try:
        remote = _cli(
            "client", "--server", f"127.0.0.1:{port}", "--model", "translator", *SENTENCES
        )
        assert remote.returncode == 0, remote.stderr[-3000:]
        assert remote.stdout.splitlines() == in_process

        # A new version lands whole (as an export writes it: elsewhere,
        # then renamed in); the export command itself ran above.
        copy_version(os.path.join(base, "1"), tmp_path / "staged")
        os.rename(tmp_path / "staged", os.path.join(base, "2"))
        with GrpcTranslationClient(f"127.0.0.1:{port}", "translator") as client:
            wait_for_status(client, [(1, "END"), (2, "AVAILABLE")], seconds=120)
            assert client.translate(SENTENCES)["translation"] == in_process
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_score_command_writes_one_score_a_line(export_base, tmp_path, capsys):
    from keras_transformer.runtime import SessionModel

    sources, targets = tmp_path / "src.txt", tmp_path / "tgt.txt"
    sources.write_text("The dog sleeps.\nA young woman reads.\nThe cat runs.\n", encoding="utf-8")
    targets.write_text("Der Hund schläft.\nEine junge Frau liest.\nx\n", encoding="utf-8")
    result = _cli(
        "score", "--model", export_base, "--source", str(sources), "--target", str(targets)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    scores = [float(line) for line in result.stdout.splitlines()]
    model = SessionModel(os.path.join(export_base, "1"))
    try:
        expected = model.run(
            "score",
            {
                "text": np.array([s.encode() for s in sources.read_text().splitlines()], object),
                "translation": np.array(
                    [t.encode() for t in targets.read_text().splitlines()], object
                ),
            },
        )
    finally:
        model.close()
    np.testing.assert_allclose(scores, expected["log_prob"], atol=1e-5)
    # `--normalize` and a mismatched target file run in this process: the
    # command's own process ran above, and its error is the same one line.
    capsys.readouterr()
    assert cli.main(
        ["score", "--model", export_base, "--source", str(sources), "--target", str(targets),
         "--normalize"]
    ) == 0  # fmt: skip
    np.testing.assert_allclose(
        [float(v) for v in capsys.readouterr().out.split()],
        expected["log_prob"] / expected["length"],
        atol=1e-5,
    )
    targets.write_text("Der Hund schläft.\n", encoding="utf-8")
    code = cli.main(
        ["score", "--model", export_base, "--source", str(sources), "--target", str(targets)]
    )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines() == [
        "keras-transformer score: error: Parallel files must have the same number of lines: "
        f"{sources} has 3, {targets} has 1"
    ]
