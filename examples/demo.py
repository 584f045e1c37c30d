"""`make demo`: the main job end to end on the embedded synthetic data.

Builds a small Transformer and trains it with `model.fit` on generated
sequences (learn to copy), printing the loss as it falls.
"""

import numpy as np

import keras_transformer as kt
from keras_transformer.models import Transformer


def main():
    import keras

    rng = np.random.default_rng(0)
    n, length, vocab = 4096, 8, 20
    source = rng.integers(3, vocab, (n, length))
    target_in = np.concatenate([np.ones((n, 1), int), source], 1)
    target_out = np.concatenate([source, 2 * np.ones((n, 1), int)], 1)
    model = Transformer.from_preset("tiny", vocab, vocab, dropout_rate=0.0)
    model.compile(
        optimizer=keras.optimizers.Adam(
            kt.schedules.WarmupSchedule(model.d_model, warmup_steps=200),
            beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=kt.losses.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
        metrics=[kt.metrics.MaskedAccuracy()],
    )
    model.fit((source, target_in), target_out, batch_size=64, epochs=3)


if __name__ == "__main__":
    main()
