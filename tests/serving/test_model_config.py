"""`read_model_config`: TF Serving's `--model_config_file` as the server
reads it, each policy and label kept, and every bad file refused with a
message that names it."""

import os

import pytest

from keras_transformer.serving.model_config import ModelEntry, read_model_config


def _config(tmp_path, text, name="models.config"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_each_policy_and_label_is_read(tmp_path):
    path = _config(
        tmp_path,
        """
        model_config_list {
          config { name: "newest" base_path: "/srv/newest" model_platform: "tensorflow" }
          config {
            name: "two" base_path: "exports/two"
            model_version_policy { latest { num_versions: 2 } }
          }
          config { name: "every" base_path: "/srv/every" model_version_policy { all {} } }
          config {
            name: "pinned" base_path: "/srv/pinned"
            model_version_policy { specific { versions: 7 versions: 3 } }
            version_labels { key: "stable" value: 3 }
            version_labels { key: "canary" value: 7 }
          }
        }
        """,
    )
    newest, two, every, pinned = read_model_config(path)
    assert newest == ModelEntry("newest", "/srv/newest")
    # A relative base path is read from the config file's folder.
    assert two.base_path == os.path.join(str(tmp_path), "exports/two")
    assert (two.version_policy, two.num_latest) == ("latest", 2)
    assert every.version_policy == "all"
    assert pinned.version_policy == (3, 7)
    assert pinned.labels == {"stable": 3, "canary": 7}


def test_same_versions_ignores_labels_only():
    entry = ModelEntry("m", "/srv/m", (1, 2), version_labels=(("stable", 1),))
    assert entry.same_versions(ModelEntry("m", "/srv/m", (1, 2)))
    assert not entry.same_versions(ModelEntry("m", "/srv/m", (1,)))
    assert not entry.same_versions(ModelEntry("m", "/srv/other", (1, 2)))


@pytest.mark.parametrize(
    "text,message",
    [
        ("model_config_list { config { name: 'm' }", "not a text ModelServerConfig"),
        ("model_config_list { config { nme: 'm' } }", "not a text ModelServerConfig"),
        ("", "needs a model_config_list"),
        ("custom_model_config { }", "needs a model_config_list"),
        ("model_config_list { }", "the model_config_list is empty"),
        ("model_config_list { config { base_path: '/m' } }", "needs a name and a base_path"),
        ("model_config_list { config { name: 'm' } }", "needs a name and a base_path"),
        ("model_config_list { config { name: 'm' base_path: '/a' } "
         "config { name: 'm' base_path: '/b' } }", "'m' is configured twice"),
        ("model_config_list { config { name: 'm' base_path: '/m' model_platform: 'pytorch' } }",
         "platform 'pytorch'"),
        ("model_config_list { config { name: 'm' base_path: '/m' "
         "model_version_policy { specific { } } } }", "empty specific policy"),
    ],
)  # fmt: skip
def test_a_bad_config_is_refused_naming_the_file(tmp_path, text, message):
    path = _config(tmp_path, text)
    with pytest.raises(ValueError, match=message) as caught:
        read_model_config(path)
    assert str(caught.value).startswith(path)


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    path = str(tmp_path / "models.config")
    with open(path, "wb") as f:
        f.write("model_config_list { config { name: 'Gr\xfc\xdfe' } }".encode("latin-1"))
    with pytest.raises(ValueError) as caught:
        read_model_config(path)
    assert str(caught.value) == f"{path}: not UTF-8 text (byte 0xfc at offset 38)"


def test_a_missing_file_is_named(tmp_path):
    path = str(tmp_path / "absent.config")
    with pytest.raises(FileNotFoundError, match="absent.config"):
        read_model_config(path)
