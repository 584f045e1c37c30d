"""TF Serving's `--model_config_file`: which models to serve, and how.

The file is a text-format `ModelServerConfig` with a `model_config_list`,
the same file the official image reads (see the repository's
`serving/models.config`): per model a name, a base path, a version policy
(`latest { num_versions }`, `all`, `specific { versions }`) and version
labels.
"""

import dataclasses
import os

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2


@dataclasses.dataclass(frozen=True)
class ModelEntry:
    """One model of a `model_config_list`.

    Attributes:
        name: the name requests use.
        base_path: the folder of its versions.
        version_policy: `"latest"`, `"all"`, or a tuple of versions.
        num_latest: how many of the newest versions `"latest"` serves.
        version_labels: `{label: version}`.
    """

    name: str
    base_path: str
    version_policy: object = "latest"
    num_latest: int = 1
    version_labels: tuple = ()

    @property
    def labels(self):
        return dict(self.version_labels)

    def same_versions(self, other):
        """Whether `other` serves the same versions (labels aside)."""
        return (self.base_path, self.version_policy, self.num_latest) == (
            other.base_path,
            other.version_policy,
            other.num_latest,
        )


def read_model_config(path):
    """Reads a model config file into `ModelEntry`s.

    Relative base paths are read from the file's folder.

    Raises:
        ValueError: the file is not a text `ModelServerConfig` with a
            `model_config_list`, or an entry is incomplete, repeated, or
            for another platform; the message names the file.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: model config file not found")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text (byte {error.object[error.start]:#04x} "
                         f"at offset {error.start})") from None  # fmt: skip
    config = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as error:
        raise ValueError(f"{path}: not a text ModelServerConfig: {error}") from None
    if config.WhichOneof("config") != "model_config_list":
        raise ValueError(f"{path}: needs a model_config_list")
    entries, names = [], set()
    for model in config.model_config_list.config:
        if not model.name or not model.base_path:
            raise ValueError(f"{path}: every model needs a name and a base_path")
        if model.name in names:
            raise ValueError(f"{path}: model {model.name!r} is configured twice")
        if model.model_platform not in ("", "tensorflow"):
            raise ValueError(
                f"{path}: model {model.name!r} has platform {model.model_platform!r}; "
                "only tensorflow is served"
            )
        names.add(model.name)
        policy = model.model_version_policy
        choice = policy.WhichOneof("policy_choice") or "latest"
        num_latest = 1
        if choice == "latest":
            num_latest = policy.latest.num_versions or 1
            version_policy = "latest"
        elif choice == "all":
            version_policy = "all"
        else:
            version_policy = tuple(sorted(policy.specific.versions))
            if not version_policy:
                raise ValueError(f"{path}: model {model.name!r} has an empty specific policy")
        base_path = model.base_path
        if not os.path.isabs(base_path):
            base_path = os.path.join(os.path.dirname(os.path.abspath(path)), base_path)
        entries.append(
            ModelEntry(
                name=model.name,
                base_path=base_path,
                version_policy=version_policy,
                num_latest=num_latest,
                version_labels=tuple(sorted(model.version_labels.items())),
            )
        )
    if not entries:
        raise ValueError(f"{path}: the model_config_list is empty")
    return entries
