"""What the encoder and decoder blocks share: arguments, sublayers and
residual wiring; and what the stacks share: the loop that builds them."""

import keras

from keras_transformer._validation import check_positive_int, check_rate
from keras_transformer.layers import activations
from keras_transformer.layers._initializers import (
    clone_initializer,
    read_weight_options,
    weight_options,
    weight_options_config,
)
from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.feed_forward import FeedForward

# Layer norm epsilon of tensor2tensor and the reference implementations.
LAYER_NORM_EPSILON = 1e-6


def validate_block_args(d_model, num_heads, dff, dropout):
    for name, value in (("d_model", d_model), ("num_heads", num_heads), ("dff", dff)):
        check_positive_int(name, value)
    if d_model % num_heads:
        raise ValueError(
            "`d_model` must be divisible by `num_heads`. Received: "
            f"d_model={d_model}, num_heads={num_heads}"
        )
    check_rate("dropout", dropout)


def check_input_depth(layer, input_shape):
    if input_shape[-1] is not None and input_shape[-1] != layer.d_model:
        raise ValueError(
            f"Layer '{layer.name}' expects inputs of depth d_model={layer.d_model}. "
            f"Received: input_shape={tuple(input_shape)}"
        )


def layer_norm(layer, name):
    return keras.layers.LayerNormalization(
        epsilon=layer.layer_norm_epsilon, dtype=layer.dtype_policy, name=name
    )


# Each dropout of a block draws from its own seed, `seed + offset`, and each
# block of a stack from `seed + BLOCK_SEEDS * index`: no two share a stream.
SEED_OFFSETS = {
    "self_attention": 1,
    "self_attention_dropout": 2,
    "cross_attention": 3,
    "cross_attention_dropout": 4,
    "feed_forward": 5,
}
BLOCK_SEEDS = 16


def dropout(layer, name):
    return keras.layers.Dropout(
        layer.dropout, seed=layer.sublayer_seed(name), dtype=layer.dtype_policy, name=name
    )


def residual(x, sublayer, norm, drop, norm_first, training):
    """`norm(x + drop(f(x)))` (post-norm, the paper) or `x + drop(f(norm(x)))`.

    `sublayer` maps the (normalized) input to `(output, extras)`, so that a
    sublayer's cache travels through the residual wiring. `drop` is None for
    a sublayer that applies its own output dropout.
    """
    y, extras = sublayer(norm(x) if norm_first else x)
    y = x + (y if drop is None else drop(y, training=training))
    return (y if norm_first else norm(y)), extras


class BlockLayer(keras.layers.Layer):
    """Arguments, validation, masking and config shared by the blocks and
    the stacks (`EncoderBlock`, `DecoderBlock`, `Encoder`, `Decoder`)."""

    def __init__(
        self,
        d_model,
        num_heads,
        dff,
        dropout=0.1,
        norm_first=False,
        activation="relu",
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        attention_dropout=None,
        kernel_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        validate_block_args(d_model, num_heads, dff, dropout)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"`seed` must be an int or None. Received: seed={seed!r}")
        if attention_dropout is not None and not 0.0 <= attention_dropout < 1.0:
            raise ValueError(
                "`attention_dropout` must be in [0, 1) or None. "
                f"Received: attention_dropout={attention_dropout!r}"
            )
        if not layer_norm_epsilon > 0:
            raise ValueError(
                "`layer_norm_epsilon` must be positive. "
                f"Received: layer_norm_epsilon={layer_norm_epsilon!r}"
            )
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        read_weight_options(
            self, kernel_regularizer, bias_regularizer, kernel_constraint, bias_constraint
        )
        self.seed = seed
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout = dropout
        # None: the same rate as `dropout`, as the paper and older configs.
        self.attention_dropout = dropout if attention_dropout is None else attention_dropout
        self.norm_first = norm_first
        self.activation = activations.get(activation)
        self.supports_masking = True

    def compute_mask(self, inputs, previous_mask=None):
        return previous_mask

    def compute_output_shape(self, inputs_shape, *args, **kwargs):
        return inputs_shape

    def get_config(self):
        config = {
            "d_model": self.d_model,
            "num_heads": self.num_heads,
            "dff": self.dff,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "norm_first": self.norm_first,
            "activation": keras.activations.serialize(self.activation),
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            **weight_options_config(self),
            "seed": self.seed,
        }
        return {**super().get_config(), **config}

    def initializers(self):
        """Fresh copies of the initializers, and the regularizers and
        constraints, for one sublayer."""
        return dict(
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            **weight_options(self),
        )

    def sublayer_seed(self, name):
        """The dropout seed of sublayer `name` (None without a seed)."""
        return None if self.seed is None else self.seed + SEED_OFFSETS[name]

    def _make_attention(self, name):
        """A `MultiHeadAttention` sublayer of this block's width and options."""
        return MultiHeadAttention(
            self.num_heads,
            self.d_model // self.num_heads,
            dropout=self.attention_dropout,
            seed=self.sublayer_seed(name),
            dtype=self.dtype_policy,
            name=name,
            **self.initializers(),
        )

    def _build_feed_forward(self, inputs_shape):
        """Builds the feed-forward sublayer and its layer norm."""
        self.feed_forward = FeedForward(
            self.d_model,
            self.dff,
            dropout=self.dropout,
            activation=self.activation,
            seed=self.sublayer_seed("feed_forward"),
            dtype=self.dtype_policy,
            name="feed_forward",
            **self.initializers(),
        )
        self.feed_forward.build(inputs_shape)
        self.feed_forward_norm = layer_norm(self, "feed_forward_norm")
        self.feed_forward_norm.build(inputs_shape)

    def _feed_forward_residual(self, x, training):
        """The feed-forward sublayer with its residual connection and norm."""
        y, _ = residual(
            x,
            lambda z: (self.feed_forward(z, training=training), None),
            self.feed_forward_norm,
            None,  # FeedForward drops its own output
            self.norm_first,
            training,
        )
        return y

    def block_options(self, index=0):
        """What a stack passes on to its block `index`."""
        return dict(
            seed=None if self.seed is None else self.seed + BLOCK_SEEDS * index,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            norm_first=self.norm_first,
            activation=self.activation,
            layer_norm_epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            **self.initializers(),
        )


class StackLayer(BlockLayer):
    """`num_layers` blocks: what `Encoder` and `Decoder` share. Takes
    `num_layers` first, then `BlockLayer`'s arguments (positional too)."""

    def __init__(self, num_layers, d_model, num_heads, dff, *args, **kwargs):
        super().__init__(d_model, num_heads, dff, *args, **kwargs)
        check_positive_int("num_layers", num_layers)
        self.num_layers = num_layers

    def _build_stack(self, block_class, inputs_shape, *other_shapes):
        """Builds `num_layers` blocks of `block_class` (each built on
        `inputs_shape, *other_shapes`) and, when pre-norm, the final norm."""
        self.blocks = []
        for i in range(self.num_layers):
            block = block_class(
                self.d_model,
                self.num_heads,
                self.dff,
                name=f"block_{i}",
                **self.block_options(i),
            )
            block.build(inputs_shape, *other_shapes)
            self.blocks.append(block)
        self.final_norm = None
        if self.norm_first:
            self.final_norm = layer_norm(self, "final_norm")
            self.final_norm.build(inputs_shape)

    def get_config(self):
        return {**super().get_config(), "num_layers": self.num_layers}


class CrossAttentionOption:
    """`with_cross_attention`, which a decoder block and the decoder stack
    share: checked when given, in the config, and True for a config saved
    before the option (those always built cross-attention). Mixed in before
    `BlockLayer` or `StackLayer`."""

    def __init__(self, *args, with_cross_attention=None, **kwargs):
        super().__init__(*args, **kwargs)
        if with_cross_attention not in (None, True, False):
            raise ValueError(
                "`with_cross_attention` must be None, True or False. "
                f"Received: with_cross_attention={with_cross_attention!r}"
            )
        self.with_cross_attention = with_cross_attention

    def get_config(self):
        return {**super().get_config(), "with_cross_attention": self.with_cross_attention}

    @classmethod
    def from_config(cls, config):
        return cls(**{"with_cross_attention": True, **config})
