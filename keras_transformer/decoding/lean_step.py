"""A decoding step of a `Transformer` made for XLA: few, large operations.

`Transformer.decode_step` runs the model's own layers, which are written
for every backend and for the graph executor. Compiled with XLA, two of
their shapes cost more than the arithmetic: a one-row product against a
`[d_model, heads, head_dim]` kernel becomes a slow elementwise loop instead
of a matrix-vector product, and each projection, mask and cache write is a
kernel of its own. The step here computes the same function from the same
weights, in the shapes XLA runs fast:

- the self-attention query, key and value projections are one product
  against their kernels concatenated, in the encoder and in the step; the
  concatenations are made once per request, or once for all when given
  (`concatenate_weights`, as the compiled export holds them);
- the encoder's attention is two batched products over the fused
  projection's heads, with no per-head projections;
- every kernel is a two-dimensional matrix, so every product is a real
  matrix product;
- the caches are `[rows, heads, length, head_dim]`, written in place at the
  step's position (`slice_update`, XLA's dynamic-update-slice) and read by
  batched products with no transposes;
- layer norms, feed-forward layers, embeddings and the output projection
  are the model's own layers.

It needs XLA (the cache write is an XLA operation): use it inside a
`tf.function(jit_compile=True)`, as `Translator(jit_compile=True)` does. The searches of
`keras_transformer.decoding` run over it unchanged.
"""

import functools
import math

import keras
import tensorflow as tf

from keras_transformer.decoding import _common

# Added to the logits of masked keys, as the model's attention does.
_LARGE_NEGATIVE = -1e9


def _matrix(kernel, rows):
    """A projection kernel as a `[rows, -1]` matrix."""
    return tf.reshape(kernel, [rows, -1])


def _heads(x, heads):
    """`[rows, d_model]` -> `[rows, heads, 1, head_dim]`."""
    return tf.reshape(x, [-1, heads, 1, x.shape[-1] // heads])


def _attend(query, keys, values, mask):
    """Queries `[..., heads, queries, head_dim]` over `[..., heads, length,
    head_dim]` keys and values; `mask` broadcasts to `[..., 1 or heads,
    queries, length]`. Returns the context `[..., heads, queries, head_dim]`."""
    logits = tf.cast(tf.matmul(query, keys, transpose_b=True), tf.float32)
    logits = tf.where(mask, logits, _LARGE_NEGATIVE)
    weights = tf.cast(tf.nn.softmax(logits, axis=-1), values.dtype)
    return tf.matmul(weights, values)


def _rows(context):
    """`[rows, heads, 1, head_dim]` -> `[rows, heads * head_dim]`."""
    return tf.reshape(context, [-1, context.shape[1] * context.shape[3]])


def _build(model):
    if not model.built:
        model.build(((None, None), (None, None)))


def _residual(x, y, norm, norm_first):
    """The blocks' residual connection: `x + y` pre-norm, `norm(x + y)` post-norm."""
    return x + y if norm_first else norm(x + y)


def _query_key_value(stack, d_model):
    """Each block's self-attention query, key and value kernels and biases
    side by side: `[{"kernel": [d_model, 3 * d_model], "bias": [3 *
    d_model]}]`, block by block of `stack` (the model's encoder or decoder)."""
    fused = []
    for block in stack.blocks:
        attention = block.self_attention
        parts = (attention._query_dense, attention._key_dense, attention._value_dense)
        fused.append(
            {
                "kernel": tf.concat([_matrix(p.kernel, d_model) for p in parts], axis=1),
                "bias": tf.concat([tf.reshape(p.bias, [-1]) for p in parts], axis=0),
            }
        )
    return fused


class LeanStep:
    """The step function of `Transformer.decode_step`, lean for XLA.

    Args:
        model: a built `keras_transformer.models.Transformer`.
        concatenated: `concatenate_weights(model)`, or variables holding
            it, to use instead of concatenating the kernels in every
            request. They are a copy: take it again after the model's
            weights change. None (the default) concatenates in each
            program, reading the model's current weights.

    Example:

    >>> import tensorflow as tf
    >>> from keras_transformer.models import Transformer
    >>> model = Transformer.from_preset("tiny", 100, 100)
    >>> lean = LeanStep(model)
    >>> @tf.function(jit_compile=True)
    ... def first_logits(source_ids):
    ...     constant, state = lean.initial_state(source_ids, max_length=8)
    ...     logits, _ = lean.step_fn(constant)(tf.fill([2], 2), 0, state)
    ...     return logits
    >>> tuple(first_logits(tf.ones((2, 5), tf.int32)).shape)
    (2, 100)
    """

    def __init__(self, model, concatenated=None):
        _build(model)
        self.model = model
        self.heads = model.num_heads
        self.head_dim = model.d_model // model.num_heads
        self.dtype = model.compute_dtype
        self.concatenated = concatenated

    @staticmethod
    def concatenate_weights(model):
        """The kernels and biases that the lean step uses concatenated.

        Returns:
            A dict of tensors: `"encoder_query_key_value"` and
            `"decoder_query_key_value"`, a `{"kernel": [d_model, 3 *
            d_model], "bias": [3 * d_model]}` per block: the
            self-attention query, key and value projections side by side.
        """
        _build(model)
        return {
            "encoder_query_key_value": _query_key_value(model.encoder, model.d_model),
            "decoder_query_key_value": _query_key_value(model.decoder, model.d_model),
        }

    def _concatenated(self, stack):
        """`concatenate_weights`'s kernels of `stack` (`"encoder"` or
        `"decoder"`), given or made now, in the model's compute dtype."""
        if self.concatenated is None:
            weights = _query_key_value(getattr(self.model, stack), self.model.d_model)
        else:
            weights = self.concatenated[f"{stack}_query_key_value"]
        return tf.nest.map_structure(lambda t: tf.cast(t, self.dtype), weights)

    def _dense(self, dense):
        """`(kernel [d_model, -1], bias [-1])` of an attention projection,
        as a matrix and a vector in the compute dtype."""
        kernel = tf.cast(_matrix(dense.kernel, self.model.d_model), self.dtype)
        return kernel, tf.cast(tf.reshape(dense.bias, [-1]), self.dtype)

    def _weights(self):
        """Each decoder block's attention weights as matrices, the
        self-attention query, key and value fused."""
        blocks = []
        fused = self._concatenated("decoder")
        for block, own_fused in zip(self.model.decoder.blocks, fused):
            own, cross = block.self_attention, block.cross_attention
            weights = {"qkv_kernel": own_fused["kernel"], "qkv_bias": own_fused["bias"]}
            for name, dense in (("output", own._output_dense),
                                ("cross_query", cross._query_dense),
                                ("cross_output", cross._output_dense)):  # fmt: skip
                weights[f"{name}_kernel"], weights[f"{name}_bias"] = self._dense(dense)
            blocks.append(weights)
        return blocks

    def initial_state(self, source_ids, max_length):
        """Encodes the source; returns `(constant, state)`.

        `constant` (the encoder's keys and values per block, `[batch, heads,
        source_length, head_dim]`, and the source padding mask) does not
        change during a search: the step closes over it, once per source
        row whatever the beams (`step_fn(constant, beams)`). `state` (the
        self-attention caches, zeros `[batch, heads, max_length,
        head_dim]`) is the search's state: tile it over beams. The step
        reads the caches' length from their shape, so a search may start
        them shorter and grow them (`grow_state`).
        """
        model = self.model
        batch = tf.shape(source_ids)[0]
        rows = self._encode(source_ids, self._concatenated("encoder"))
        # A product per block and projection: taken as column slices of
        # one product of every block's kernels, the cross-attention
        # caches made beam search at batch 1 about 10% slower a token.
        cross = []
        for block in model.decoder.blocks:
            pair = []
            for dense in (block.cross_attention._key_dense, block.cross_attention._value_dense):
                kernel, bias = self._dense(dense)
                projected = tf.matmul(rows, kernel) + bias
                projected = tf.reshape(projected, [batch, -1, self.heads, self.head_dim])
                pair.append(tf.transpose(projected, [0, 2, 1, 3]))
            cross.append(tuple(pair))
        constant = {
            "cross_attention_cache": tuple(cross),
            "source_mask": tf.not_equal(source_ids, 0)[:, None, None, :],
        }
        zeros = tf.zeros([batch, self.heads, max_length, self.head_dim], self.dtype)
        state = {"self_attention_cache": tuple((zeros, zeros) for _ in model.decoder.blocks)}
        return constant, state

    def _encode(self, source_ids, query_key_value):
        """`Transformer.encode` of `source_ids [batch, length]`, lean: the
        rows `[batch * length, d_model]`, equal to the model's on real
        tokens (padding rows, which no query reads, may differ)."""
        model = self.model
        d = model.d_model
        norm_first = model.norm_first
        batch = tf.shape(source_ids)[0]
        scale = 1.0 / math.sqrt(self.head_dim)
        mask = tf.not_equal(source_ids, 0)[:, None, None, :]  # [batch, 1, 1, length]
        rows = tf.reshape(model.source_embedding(source_ids), [-1, d])
        for block, fused in zip(model.encoder.blocks, query_key_value):
            attention = block.self_attention
            h = block.self_attention_norm(rows) if norm_first else rows
            qkv = tf.matmul(h, fused["kernel"]) + fused["bias"]
            # [batch * length, 3 * d] -> [3, batch, heads, length, head_dim]
            qkv = tf.reshape(qkv, [batch, -1, 3, self.heads, self.head_dim])
            q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))
            context = _attend(q * scale, k, v, mask)
            context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, d])
            kernel, bias = self._dense(attention._output_dense)
            y = tf.matmul(context, kernel) + bias
            rows = _residual(rows, y, block.self_attention_norm, norm_first)
            h = block.feed_forward_norm(rows) if norm_first else rows
            y = block.feed_forward(h, training=False)
            rows = _residual(rows, y, block.feed_forward_norm, norm_first)
        if model.encoder.final_norm is not None:
            rows = model.encoder.final_norm(rows)
        return rows

    @staticmethod
    def grow_state(state, length):
        """`state` with caches of `length` positions: the written ones kept,
        zeros after them; the searches' `grow_state`."""
        return _common.grow_caches(state, length)

    def step_fn(self, constant, beams=1):
        """`step_fn(ids [rows], index, state) -> (logits [rows, vocab],
        state)` over `constant` of `batch` rows, where `rows` is `batch *
        beams`, the beams of a source row next to each other (as
        `beam_search` lays them out).

        The beams of a source row share its encoder keys and values, which
        are not tiled: the cross-attention runs the beams' queries of a
        row as one batch element (`beams` queries), so it reads each
        source once, not once a beam, and its batched products have
        `beams` times fewer, larger elements.
        """
        model = self.model
        norm_first = model.norm_first
        scale = 1.0 / math.sqrt(self.head_dim)
        weights = self._weights()

        residual = functools.partial(_residual, norm_first=norm_first)

        def step(ids, index, state):
            x = model.target_embedding(ids[:, None], start_index=index)[:, 0]  # [rows, d]
            # A padding token as query attends to nothing, as in the model.
            is_token = tf.not_equal(ids, 0)[:, None, None, None]
            length = state["self_attention_cache"][0][0].shape[2]
            written = (tf.range(length) <= index)[None, None, None, :]
            own_mask = tf.logical_and(written, is_token)
            # [batch, 1, beams, source_length]: each beam's own query row.
            cross_mask = tf.logical_and(
                constant["source_mask"], tf.reshape(is_token, [-1, 1, beams, 1])
            )
            caches = []
            blocks = model.decoder.blocks
            for block, w, (keys, values), (cross_keys, cross_values) in zip(
                blocks, weights, state["self_attention_cache"], constant["cross_attention_cache"]
            ):
                h = block.self_attention_norm(x) if norm_first else x
                qkv = tf.matmul(h, w["qkv_kernel"]) + w["qkv_bias"]
                q, k, v = tf.split(qkv, 3, axis=1)
                keys = keras.ops.slice_update(keys, (0, 0, index, 0), _heads(k, self.heads))
                values = keras.ops.slice_update(values, (0, 0, index, 0), _heads(v, self.heads))
                caches.append((keys, values))
                context = _rows(_attend(_heads(q * scale, self.heads), keys, values, own_mask))
                y = tf.matmul(context, w["output_kernel"]) + w["output_bias"]
                x = residual(x, y, block.self_attention_norm)

                h = block.cross_attention_norm(x) if norm_first else x
                q = tf.matmul(h, w["cross_query_kernel"]) + w["cross_query_bias"]
                # [batch * beams, d] -> [batch, heads, beams, head_dim].
                q = tf.reshape(q * scale, [-1, beams, self.heads, self.head_dim])
                context = _attend(
                    tf.transpose(q, [0, 2, 1, 3]), cross_keys, cross_values, cross_mask
                )
                context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, model.d_model])
                y = tf.matmul(context, w["cross_output_kernel"]) + w["cross_output_bias"]
                x = residual(x, y, block.cross_attention_norm)

                h = block.feed_forward_norm(x) if norm_first else x
                x = residual(x, block.feed_forward(h, training=False), block.feed_forward_norm)
            if model.decoder.final_norm is not None:
                x = model.decoder.final_norm(x)
            return model._logits(x), {"self_attention_cache": tuple(caches)}

        return step
