"""`export_run`: every format's export of a training run, one way.

It checks the options against the format (`ExportOptions`, its
registered `Exporter`), loads the run once (the weights it picks) and
hands the model and its tokenizers to the exporter, which writes a staging
folder that `write_version` renames into `export_base/<version>/`: every
format's versions are written, numbered and never overwritten alike.
"""

import dataclasses

from keras_transformer._extras import require
from keras_transformer._version_folders import write_version
from keras_transformer.export.exporters import LoadedRun, get_exporter
from keras_transformer.export.options import ExportOptions
from keras_transformer.training.run_directory import load_run


def export_run(run, export_base=None, /, **fields):
    """Exports a training run in the format the options name; returns the
    version folder written (`export_base/<version>/`).

    Args:
        run: the run directory, or an `ExportOptions` (then `export_base`
            is none).
        export_base: the model's folder of numbered versions.
        **fields: `ExportOptions` fields (`format`, `version`, `weights`,
            ...; generation settings by their own names, `beam_size=5`),
            over those of an `ExportOptions` given as `run`.

    Example:

    >>> import os
    >>> path = export_run(run_dir, f"{tmp_dir}/ct2", format="ctranslate2")
    >>> os.path.basename(path)
    '1'
    """
    if isinstance(run, ExportOptions):
        if export_base is not None:
            raise TypeError("export_run(options) takes the export base from the options")
        options = run
        if fields:
            options = ExportOptions.from_dict({**dataclasses.asdict(options), **fields})
    else:
        options = ExportOptions.from_dict({"run": run, "export_base": export_base, **fields})
    exporter = get_exporter(options.format)
    if exporter.extra_module:
        require(exporter.extra_module, exporter.extra)
    model, source, target, _ = load_run(options.run, weights=options.weights)
    loaded = LoadedRun(model, source, target, options.run)
    return write_version(
        options.export_base,
        options.version,
        lambda staging: exporter.export(loaded, staging, options),
    )
