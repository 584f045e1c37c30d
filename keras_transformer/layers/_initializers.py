"""What the layers do alike with their weights' options: initializers
cloned per sublayer, and regularizers and constraints read and written."""

import keras

# The options every layer with kernels takes, as keras.layers.Dense and
# keras.layers.MultiHeadAttention name them.
REGULARIZERS = ("kernel_regularizer", "bias_regularizer")
CONSTRAINTS = ("kernel_constraint", "bias_constraint")


def clone_initializer(initializer):
    """A fresh copy, so that sublayers do not share one seeded initializer."""
    return initializer.__class__.from_config(initializer.get_config())


def read_weight_options(
    layer, kernel_regularizer, bias_regularizer, kernel_constraint, bias_constraint
):
    """Sets `layer`'s regularizers and constraints (names, configs or
    objects; None for none)."""
    layer.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
    layer.bias_regularizer = keras.regularizers.get(bias_regularizer)
    layer.kernel_constraint = keras.constraints.get(kernel_constraint)
    layer.bias_constraint = keras.constraints.get(bias_constraint)


def weight_options(layer):
    """`layer`'s regularizers and constraints, as objects, for a sublayer."""
    return {name: getattr(layer, name) for name in REGULARIZERS + CONSTRAINTS}


def weight_options_config(layer):
    """`layer`'s regularizers and constraints, serialized for `get_config`."""
    config = {name: keras.regularizers.serialize(getattr(layer, name)) for name in REGULARIZERS}
    config.update({name: keras.constraints.serialize(getattr(layer, name)) for name in CONSTRAINTS})
    return config
