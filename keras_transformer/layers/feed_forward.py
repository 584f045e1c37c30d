"""The position-wise feed-forward network."""

import keras

from keras_transformer._validation import check_positive_int
from keras_transformer.layers import _rows, activations
from keras_transformer.layers._initializers import (
    clone_initializer,
    read_weight_options,
    weight_options,
    weight_options_config,
)


@keras.saving.register_keras_serializable(package="keras_transformer")
class FeedForward(keras.layers.Layer):
    """`Dense(dff, activation) -> Dense(d_model) -> Dropout`, per position.

    `dropout` is the paper's dropout on this sub-layer's output, applied
    before the residual addition; the residual connection and layer norm
    belong to the blocks (`EncoderBlock`, `DecoderBlock`).

    Args:
        d_model: input and output size.
        dff: hidden size.
        dropout: dropout rate on the sub-layer's output (the paper's
            residual dropout), applied before the blocks add the residual.
        activation: hidden activation, e.g. `"relu"` (the paper) or `"gelu"`.
        kernel_initializer: initializer of both dense kernels.
        bias_initializer: initializer of both dense biases.
        kernel_regularizer, bias_regularizer: regularizers of both dense
            kernels and biases.
        kernel_constraint, bias_constraint: constraints of both dense
            kernels and biases.
        seed: seed of the output dropout.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `[batch, length, d_model]`.
        training: whether dropout is active.

    Returns:
        `[batch, length, d_model]`; the input's mask is kept.

    Weights by role (once built), for converters: `weights_by_role()`.

    Example:

    >>> tuple(FeedForward(d_model=8, dff=32)(keras.ops.ones((2, 3, 8))).shape)
    (2, 3, 8)
    """

    def __init__(
        self,
        d_model,
        dff,
        dropout=0.1,
        activation="relu",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (("d_model", d_model), ("dff", dff)):
            check_positive_int(name, value)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout!r}")
        self.d_model = d_model
        self.dff = dff
        self.dropout = dropout
        self.activation = activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        read_weight_options(
            self, kernel_regularizer, bias_regularizer, kernel_constraint, bias_constraint
        )
        self.seed = seed
        self.supports_masking = True

    def _dense(self, units, name, activation=None):
        return keras.layers.Dense(
            units,
            activation=activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            **weight_options(self),
            dtype=self.dtype_policy,
            name=name,
        )

    def weights_by_role(self):
        """The layer's variables by role, for converters and weight surgery
        (a method: see `MultiHeadAttention.weights_by_role`).

        Returns:
            A dict: `intermediate_kernel` `[d_model, dff]`,
            `intermediate_bias` `[dff]`, `output_kernel` `[dff, d_model]`,
            `output_bias` `[d_model]`.

        Example:

        >>> layer = FeedForward(d_model=8, dff=32)
        >>> _ = layer(keras.ops.ones((2, 3, 8)))
        >>> tuple(layer.weights_by_role()["output_kernel"].shape)
        (32, 8)
        """
        if not self.built:
            raise ValueError(f"{self.name} has no weights before it is built")
        return {
            "intermediate_kernel": self._intermediate.kernel,
            "intermediate_bias": self._intermediate.bias,
            "output_kernel": self._output.kernel,
            "output_bias": self._output.bias,
        }

    def build(self, input_shape):
        self._intermediate = self._dense(self.dff, "intermediate", self.activation)
        self._intermediate.build(input_shape)
        self._dropout_layer = keras.layers.Dropout(
            self.dropout, seed=self.seed, dtype=self.dtype_policy, name="dropout"
        )
        self._output = self._dense(self.d_model, "output")
        self._output.build((*input_shape[:-1], self.dff))

    def call(self, inputs, training=None):
        rows, restore = _rows.as_rows(inputs)  # position-wise: one matmul each
        hidden = self._intermediate(rows)  # [rows, dff]
        return self._dropout_layer(restore(self._output(hidden)), training=training)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.d_model)

    def get_config(self):
        config = {
            "d_model": self.d_model,
            "dff": self.dff,
            "dropout": self.dropout,
            "activation": keras.activations.serialize(self.activation),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            **weight_options_config(self),
            "seed": self.seed,
        }
        return {**super().get_config(), **config}
