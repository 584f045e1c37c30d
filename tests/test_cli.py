"""The command line passes its flags through to the library unchanged."""

import pytest

from keras_transformer import cli
from keras_transformer.serving import grpc_client
from keras_transformer.serving import server as serving_server


def test_serve_passes_the_version_policy_and_labels(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(
        serving_server, "serve_forever", lambda *args, **kwargs: calls.append((args, kwargs))
    )
    assert (
        cli.main(
            [
                "serve",
                "--model-base-path",
                str(tmp_path),
                "--model-name",
                "translator",
                "--version-policy",
                "all",
                "--version-label",
                "stable=1",
                "--version-label",
                "canary=2",
            ]
        )
        == 0
    )
    ((args, kwargs),) = calls
    assert args == (str(tmp_path), "translator")
    assert kwargs["version_policy"] == "all"
    assert kwargs["version_labels"] == {"stable": 1, "canary": 2}


def test_serve_refuses_a_bad_label_by_name(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(
        serving_server, "serve_forever", lambda *args, **kwargs: pytest.fail("served")
    )
    assert (
        cli.main(
            [
                "serve",
                "--model-base-path",
                str(tmp_path),
                "--model-name",
                "translator",
                "--version-label",
                "stable",
            ]
        )
        == 2
    )
    assert "LABEL=VERSION" in capsys.readouterr().err


class _Client:
    calls = []

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def translate(self, sentences, **kwargs):
        self.calls.append(kwargs)
        return {"translation": [s.upper() for s in sentences]}


@pytest.mark.parametrize(
    "flags,version,label",
    [
        ([], None, None),
        (["--version", "3"], 3, None),
        (["--version-label", "canary"], None, "canary"),
    ],
)
def test_client_names_a_version_or_a_label(monkeypatch, capsys, flags, version, label):
    monkeypatch.setattr(grpc_client, "GrpcTranslationClient", _Client)
    _Client.calls.clear()
    assert cli.main(["client", *flags, "Guten Tag"]) == 0
    assert capsys.readouterr().out == "GUTEN TAG\n"
    assert _Client.calls == [
        {"signature": "serving_default", "version": version, "version_label": label}
    ]


def test_client_refuses_a_version_and_a_label():
    with pytest.raises(SystemExit):
        cli.main(["client", "--version", "1", "--version-label", "stable", "x"])
