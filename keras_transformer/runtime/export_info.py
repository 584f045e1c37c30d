"""What an export says of itself: `assets.extra/keras_transformer.json`.

An export compiled with XLA records there that it is (TF Serving needs
`XLA_FLAG` for it) and the shapes it compiled; a plain export has no such
file. The exporter writes it (`export.compiled`); the server, the corpus
workers and `keras-transformer info` read it here.
"""

import json
import os

INFO_PATH = os.path.join("assets.extra", "keras_transformer.json")
XLA_FLAG = "--xla_cpu_compilation_enabled=true"


def read_export_info(export_dir):
    """The export's `keras_transformer.json` as a dict, or `{}` (a plain
    export has none)."""
    path = os.path.join(export_dir, INFO_PATH)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)
