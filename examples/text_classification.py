"""The encoder blocks inside your own functional Keras model: classification.

Builds `PositionalEmbedding -> EncoderBlock x 2 -> masked pooling -> Dense`
as a plain functional model and trains it on generated data: is the token
"7" followed later by the token "9" in a padded sequence? (order matters,
so attention must look across positions; padding must be ignored). Shows
that masks propagate from the embedding through the blocks into the pooling
and that the model saves and loads without custom_objects. Under a minute.
"""

import os

import keras
import numpy as np

import keras_transformer  # noqa: F401  (registers the layers for loading)
from keras_transformer.layers import EncoderBlock, PositionalEmbedding

QUICK = os.environ.get("KT_EXAMPLE_QUICK") == "1"
rng = np.random.default_rng(0)


def make_data(n, vocab=20, max_length=16):
    lengths = rng.integers(4, max_length + 1, n)
    x = np.zeros((n, max_length), "int32")
    y = np.zeros(n, "int32")
    for i, length in enumerate(lengths):
        x[i, :length] = rng.integers(1, vocab, length)
        y[i] = int(any(x[i, a] == 7 and 9 in x[i, a + 1 : length] for a in range(length)))
    return x, y


x_train, y_train = make_data(4000 if not QUICK else 800)
x_test, y_test = make_data(500)

tokens = keras.Input((None,), dtype="int32")
h = PositionalEmbedding(vocab_size=20, d_model=64, max_length=64)(tokens)
h = EncoderBlock(d_model=64, num_heads=4, dff=128, dropout=0.1)(h)
h = EncoderBlock(d_model=64, num_heads=4, dff=128, dropout=0.1)(h)
h = keras.layers.GlobalAveragePooling1D()(h)  # averages real tokens only
outputs = keras.layers.Dense(1, activation="sigmoid")(h)
model = keras.Model(tokens, outputs)
model.compile(
    optimizer=keras.optimizers.Adam(1e-3), loss="binary_crossentropy", metrics=["accuracy"]
)
model.fit(
    x_train, y_train, batch_size=64, epochs=8 if not QUICK else 1, validation_split=0.1, verbose=2
)
print("test accuracy:", model.evaluate(x_test, y_test, verbose=0)[1])

path = os.path.join(os.environ.get("KT_EXAMPLE_DIR", "runs"), "classifier.keras")
os.makedirs(os.path.dirname(path), exist_ok=True)
model.save(path)
restored = keras.saving.load_model(path)
np.testing.assert_allclose(
    restored.predict(x_test[:8], verbose=0), model.predict(x_test[:8], verbose=0), atol=1e-6
)
print("saved and reloaded:", path)
