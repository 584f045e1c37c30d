"""The `small` model the decode benchmarks time (`decode_latency.py`,
`decode_peers.py`, `decode_jax.py`): 3+3 layers, d_model 256, 4 heads,
dff 1024, 8,000-piece vocabularies, 24-token sources, 32 generated tokens.

TensorFlow-free, so that `decode_jax.py` times a process without it.
"""

LAYERS, D_MODEL, HEADS, DFF, VOCAB = 3, 256, 4, 1024, 8000
SOURCE_LENGTH, GENERATED = 24, 32


def random_small_model(source_vocab_size=VOCAB, target_vocab_size=VOCAB):
    """The `small` model, random weights (seed 0), with the end token
    disabled: every request generates as many tokens as it may."""
    import keras

    from keras_transformer.models import Transformer
    from keras_transformer.special_ids import END_ID

    keras.utils.set_random_seed(0)
    model = Transformer(LAYERS, D_MODEL, HEADS, DFF, source_vocab_size, target_vocab_size)
    model.build(((None, None), (None, None)))
    kernel, bias = model.output_projection.get_weights()
    bias[END_ID] = -1e9
    model.output_projection.set_weights([kernel, bias])
    return model
