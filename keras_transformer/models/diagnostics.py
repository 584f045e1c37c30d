"""Measures of what a trained `Transformer` does with its source.

A translation model can learn a fluent target-side language model and
little else: its encoder gives every source position the same vector
(rank collapse) and the cross-attention spreads evenly over the source.
Validation loss and accuracy show such a model only as "stuck"; these two
measures say where it is stuck.
"""

from keras import ops


def _cosine_similarity_between_positions(hidden, mask):
    """Mean cosine similarity over pairs of distinct non-padding positions."""
    hidden = ops.cast(hidden, "float32")
    norms = ops.sqrt(ops.sum(ops.square(hidden), axis=-1, keepdims=True))
    unit = hidden / ops.maximum(norms, 1e-12)
    similarity = ops.einsum("bid,bjd->bij", unit, unit)
    mask = ops.cast(mask, "float32")
    pairs = mask[:, :, None] * mask[:, None, :]
    length = ops.shape(mask)[1]
    pairs = pairs * (1.0 - ops.eye(length, dtype="float32"))
    return float(ops.sum(similarity * pairs) / ops.maximum(ops.sum(pairs), 1.0))


def _ensure_built(model):
    if not model.built:
        model.build(((None, None), (None, None)))


def encoder_position_similarity(model, source_ids):
    """How alike the encoder makes the positions of a sentence, layer by layer.

    For the embedding output and after each encoder block: the cosine
    similarity of every two distinct non-padding positions of a sentence,
    averaged over the pairs of the batch. A trained encoder keeps positions
    apart (0.02-0.2 on Multi30k); a value near 1 says the encoder has
    collapsed to one vector per sentence. Under pre-norm the last entry
    includes the encoder's final norm, so that it is what the decoder reads.

    Args:
        model: a `Transformer`.
        source_ids: int `[batch, source_length]`, 0 is padding; sentences
            need two tokens or more to count.

    Returns:
        A list of `num_layers + 1` floats: the embedding, then each block.

    Example:

    >>> from keras_transformer.models import Transformer
    >>> transformer = Transformer.from_preset("tiny", 50, 50)
    >>> values = encoder_position_similarity(transformer, np.array([[5, 6, 7, 0]]))
    >>> len(values)
    3
    """
    _ensure_built(model)
    mask = ops.not_equal(source_ids, 0)
    hidden = model.source_embedding(source_ids)
    similarities = [_cosine_similarity_between_positions(hidden, mask)]
    blocks = model.encoder.blocks
    for i, block in enumerate(blocks):
        hidden = block(hidden, mask=mask, training=False)
        if i == len(blocks) - 1 and model.encoder.final_norm is not None:
            hidden = model.encoder.final_norm(hidden)
        similarities.append(_cosine_similarity_between_positions(hidden, mask))
    return similarities


def cross_attention_entropy(model, source_ids, target_ids):
    """How evenly each decoder block's cross-attention spreads over the source.

    The entropy of each head's attention weights over the source, divided
    by its largest value `log(source length)`, averaged over heads and
    non-padding target positions: 1 is uniform attention (the decoder reads
    the source as a bag), lower is sharper (a trained model: about 0.4-0.7).
    Sentences of one source token are left out (their entropy is always 0).

    Args:
        model: a `Transformer`.
        source_ids: int `[batch, source_length]`, 0 is padding.
        target_ids: int `[batch, target_length]`, the decoder's input (start
            token first), 0 is padding.

    Returns:
        A list of `num_decoder_layers` floats in [0, 1], one per decoder
        block.

    Example:

    >>> from keras_transformer.models import Transformer
    >>> transformer = Transformer.from_preset("tiny", 50, 50)
    >>> values = cross_attention_entropy(
    ...     transformer, np.array([[5, 6, 7, 0]]), np.array([[1, 8, 9]]))
    >>> len(values), all(0.0 <= v <= 1.0 for v in values)
    (2, True)
    """
    _ensure_built(model)
    source_mask = ops.not_equal(source_ids, 0)
    target_mask = ops.not_equal(target_ids, 0)
    source_lengths = ops.sum(ops.cast(source_mask, "float32"), axis=-1)
    encoded = model.encode(source_ids, training=False)
    hidden = model.target_embedding(target_ids)
    # [batch, 1, target_length]: the target positions that count.
    weights = ops.cast(target_mask, "float32")[:, None, :]
    weights = weights * ops.cast(source_lengths > 1.0, "float32")[:, None, None]
    largest = ops.log(ops.maximum(source_lengths, 2.0))[:, None, None]
    heads = model.decoder_num_heads
    entropies = []
    for block in model.decoder.blocks:
        # One call gives the block's output and its cross-attention weights.
        hidden, scores = block(
            hidden,
            encoded,
            inputs_mask=target_mask,
            encoder_outputs_mask=source_mask,
            training=False,
            return_attention_scores=True,
        )
        scores = ops.cast(scores, "float32")
        entropy = -ops.sum(scores * ops.log(ops.maximum(scores, 1e-12)), axis=-1)
        total = ops.sum(entropy / largest * weights)
        entropies.append(float(total / ops.maximum(ops.sum(weights) * heads, 1.0)))
    # Rounding can put a uniform head a hair above 1.
    return [min(value, 1.0) for value in entropies]
