"""An export's record of the `GenerationConfig` it was made with.

`assets.extra/generation.json` (TF Serving reads nothing there but its
warmup records): what every signature of the export decodes with, for the
user, `serve`'s status and the next exporter. Exports made before the
record existed have none.
"""

import os

from keras_transformer.decoding.generation_config import GenerationConfig

GENERATION_PATH = os.path.join("assets.extra", "generation.json")


def write_generation(export_dir, generation):
    """Writes `generation` (a `GenerationConfig`) into the export."""
    path = os.path.join(export_dir, GENERATION_PATH)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    generation.write(path)
    return path


def read_generation(export_dir):
    """The export's `GenerationConfig`, or None for an export without a
    record (one made before it existed)."""
    path = os.path.join(export_dir, GENERATION_PATH)
    if not os.path.exists(path):
        return None
    return GenerationConfig.read(path)
