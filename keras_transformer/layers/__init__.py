"""Transformer layers: attention, embeddings, blocks and stacks."""

from keras_transformer.layers.activations import gelu_sigmoid, gelu_tanh
from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.decoder import Decoder
from keras_transformer.layers.decoder_block import DecoderBlock
from keras_transformer.layers.encoder import Encoder
from keras_transformer.layers.encoder_block import EncoderBlock
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.position_encoding import sinusoidal_position_encoding
from keras_transformer.layers.positional_embedding import PositionalEmbedding

__all__ = [
    "Decoder",
    "DecoderBlock",
    "Encoder",
    "EncoderBlock",
    "FeedForward",
    "MultiHeadAttention",
    "PositionalEmbedding",
    "gelu_sigmoid",
    "gelu_tanh",
    "sinusoidal_position_encoding",
]
