"""The synthetic task as a tensorflow-datasets builder.

Importing this module registers the dataset `synthetic_translation`, so
`tfds.load("synthetic_translation", data_dir=...)` prepares it locally (its
"download" is the generator: nothing is fetched).
"""

import tensorflow_datasets as tfds

from keras_transformer.data import synthetic


class SyntheticTranslation(tfds.core.GeneratorBasedBuilder):
    """English -> German-like pairs from `keras_transformer.data.synthetic`."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=synthetic.__doc__,
            features=tfds.features.Translation(languages=("en", "de")),
            supervised_keys=("en", "de"),
        )

    def _split_generators(self, dl_manager):
        return {name: self._generate_examples(name) for name in synthetic.SPLITS}

    def _generate_examples(self, split):
        for index, (en, de) in enumerate(synthetic.split_pairs(split)):
            yield index, {"en": en, "de": de}
