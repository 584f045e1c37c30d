"""Multi-head attention with full mask handling and a fixed-size cache."""

import math

import keras
from keras import ops

from keras_transformer._validation import check_positive_int, check_rate
from keras_transformer.layers import masking
from keras_transformer.layers._initializers import (
    clone_initializer,
    read_weight_options,
    weight_options,
    weight_options_config,
)

# Added to the logits of masked keys before the softmax, which runs in float32.
_LARGE_NEGATIVE = -1e9


def _write_cache(cache, index, new, in_place):
    """Writes `new [batch, heads, step, dim]` into `cache [batch, heads,
    max_length, dim]` at positions `index...`.

    `in_place`: a dynamic-update-slice, one in-place write under XLA, JAX
    and PyTorch, but on TensorFlow an XLA operation that a graph without
    XLA (a plain SavedModel in TF Serving) cannot run. Otherwise what runs
    everywhere: a scatter of the step's rows, which TensorFlow does in
    place, or a positional select for several positions at once.
    """
    index = ops.cast(index, "int32")
    new = ops.cast(new, cache.dtype)
    if in_place:
        return ops.slice_update(cache, (0, 0, index, 0), new)
    if new.shape[2] == 1:
        flat = ops.reshape(cache, (-1, *cache.shape[2:]))  # [batch * heads, max_length, dim]
        rows = ops.shape(flat)[0]
        indices = ops.stack(
            [ops.arange(rows, dtype="int32"), ops.full((rows,), index, dtype="int32")], axis=1
        )
        updates = ops.reshape(new, (-1, new.shape[-1]))  # [batch * heads, dim]
        return ops.reshape(ops.scatter_update(flat, indices, updates), ops.shape(cache))
    positions = ops.arange(ops.shape(cache)[2], dtype="int32")  # [max_length]
    step = ops.shape(new)[2]
    in_window = ops.logical_and(positions >= index, positions < index + step)
    source = ops.clip(positions - index, 0, step - 1)
    placed = ops.take(new, source, axis=2)  # [batch, heads, max_length, dim]
    return ops.where(in_window[None, None, :, None], placed, cache)


def _heads_first(x):
    """`[batch, length, heads, dim]` -> `[batch, heads, length, dim]`; a
    reshape, not a copy, for decoding's one position."""
    if x.shape[1] == 1:
        return ops.reshape(x, (-1, x.shape[2], 1, x.shape[3]))
    return ops.transpose(x, (0, 2, 1, 3))


def _positions_first(x):
    """`[batch, heads, length, dim]` -> `[batch, length, heads, dim]`."""
    if x.shape[2] == 1:
        return ops.reshape(x, (-1, 1, x.shape[1], x.shape[3]))
    return ops.transpose(x, (0, 2, 1, 3))


def _group_rows(x, rows):
    """`[rows * g, length, ...]` -> `[rows, g * length, ...]`: the queries of
    `g` consecutive rows (a source row's beams) as one row's."""
    if x is None:
        return None
    return ops.reshape(x, (rows, -1, *x.shape[2:]))


class _Projection(keras.layers.EinsumDense):
    """`EinsumDense` computed as one two-dimensional matmul.

    The weights (shapes, names, order) are exactly `EinsumDense`'s, so they
    transfer to and from `keras.layers.MultiHeadAttention`. The computation
    differs: TensorFlow runs `abc,cde->abde` as a batched matmul against a
    broadcast kernel, and its kernel gradient as one matmul per batch row
    followed by a sum. Flattening to `[rows, in] @ [in, out]` runs a single
    matmul each way, which is what oneDNN is fast at.

    Args:
        contracted_dims: how many trailing input axes the kernel contracts
            (1 for the query/key/value projections, 2 for the output one).
        **kwargs: `EinsumDense` arguments.
    """

    def __init__(self, contracted_dims, **kwargs):
        super().__init__(**kwargs)
        self.contracted_dims = contracted_dims

    def call(self, inputs, training=None):
        n = self.contracted_dims
        kernel_shape = tuple(self.kernel.shape)
        in_size = math.prod(kernel_shape[:n])
        inner = tuple(inputs.shape[1 : len(inputs.shape) - n])
        if all(inner):  # e.g. decoding's one position (not None, not 0: see `_rows`)
            leading = (-1, *inner)
        else:
            leading = ops.shape(inputs)[: len(inputs.shape) - n]
        kernel = ops.cast(ops.reshape(self.kernel, (in_size, -1)), self.compute_dtype)
        x = ops.matmul(ops.reshape(inputs, (-1, in_size)), kernel)
        x = ops.reshape(x, (*leading, *kernel_shape[n:]))
        if self.bias is not None:
            # Added after the reshape: TensorFlow would fuse a matmul and
            # its bias into a oneDNN inner product that does not use AMX.
            x = x + ops.cast(self.bias, self.compute_dtype)
        return x


def _softmax_over_keys(logits):
    """Softmax over the last (key) axis.

    Over a single key it is exactly 1, masked or not. Keras' softmax warns
    when that axis has static size 1 ("likely not what you intended"),
    which for attention over a one-token sequence (a one-piece sentence, a
    first decoding step) is wrong: the ones are returned directly.
    """
    if logits.shape[-1] == 1:
        return ops.ones_like(logits)
    return ops.softmax(logits, axis=-1)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Scaled dot-product attention over several heads (Vaswani et al., 2017).

    Weight-compatible with `keras.layers.MultiHeadAttention`: the projections
    have the same shapes and order (`query`, `key`, `value`,
    `attention_output`; kernel then bias), so `set_weights` transfers weights
    both ways and the outputs agree.

    Masks: all masks are boolean and `True` means "may attend". The padding
    masks of `query`, `value` and `key` arrive through Keras mask propagation
    (or explicitly as `query_mask`, `value_mask`, `key_mask`), an explicit
    `attention_mask` is `[batch, query_length, key_length]`, and
    `use_causal_mask` adds a lower-triangular mask. They are merged in
    `masking.merge_attention_masks`. The output carries the query's mask.
    A query whose keys are all masked gets finite output: like the Keras
    layer, it averages the values uniformly when neither scores are returned
    nor dropout is configured (the softmax of equal masked logits), and
    attends to nothing (zero weights) when they are.

    Cache: `init_cache(batch_size, max_length)` returns zero keys and
    values `([batch, heads, max_length, key_dim], [batch, heads, max_length,
    value_dim])`, the layout the attention reads without a transpose.
    Called with `cache` and `cache_index`,
    the layer projects the new `value`/`key` positions, writes them at
    `cache_index`, and attends over the cache causally: query `i` sees cache
    positions `<= cache_index + i`. Called with `cache` and no
    `cache_index`, the cache is read as precomputed keys and values
    (cross-attention, see `precompute_cache`) and is not changed; it may
    hold fewer rows than the query, `query_rows / cache_rows` consecutive
    query rows (a source's beams) then sharing each cache row, read once
    for all of them. With a cache the call returns `(output, cache)`, or
    `(output, scores, cache)` with scores.

    Args:
        num_heads: number of attention heads.
        key_dim: size of each head for query and key.
        value_dim: size of each head for value; defaults to `key_dim`.
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections use a bias.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the projection biases.
        kernel_regularizer, bias_regularizer: regularizers of the
            projections' kernels and biases.
        kernel_constraint, bias_constraint: constraints of the projections'
            kernels and biases.
        seed: seed of the attention dropout.
        **kwargs: base layer arguments (`name`, `dtype`,
            `activity_regularizer`, ...).

    Call arguments:
        query: `[batch, query_length, query_dim]`.
        value: `[batch, key_length, value_dim]`.
        key: `[batch, key_length, key_dim]`; defaults to `value`.
        attention_mask: boolean `[batch, query_length, key_length]`.
        return_attention_scores: also return `[batch, heads, query_length,
            key_length]` attention weights.
        training: whether dropout is active.
        use_causal_mask: mask future keys (query `i` sees keys `j <= i`).
        cache: key/value cache, see above.
        cache_index: position at which the new keys and values are written.
        compiled: the call runs compiled (`tf.function(jit_compile=True)`,
            `jax.jit`): the cache is written in place (a
            dynamic-update-slice, which TensorFlow runs only under XLA, not
            in a plain graph), and cached self-attention (`query` is
            `value`, no `key`) projects the query, key and value in one product, its
            kernels side by side (concatenated once a program: the
            compiler hoists them out of the decoding loop). Off, the write
            is a scatter that any TensorFlow graph runs, and the products
            are three.
        query_mask: boolean `[batch, query_length]` padding mask of `query`
            (True on tokens); Keras fills it from `query`'s mask.
        value_mask: boolean `[batch, key_length]` padding mask of `value`;
            Keras fills it from `value`'s mask.
        key_mask: boolean `[batch, key_length]` padding mask of `key`;
            Keras fills it from `key`'s mask (ignored when `key` is None).

    Returns:
        `output` `[batch, query_length, query_dim]`; with scores
        `(output, scores)`; with a cache `(output, cache)` or
        `(output, scores, cache)`.

    Weights by role (once built), for converters and weight surgery:
    `weights_by_role()`.

    Example:

    >>> layer = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = keras.random.normal((3, 5, 8))
    >>> tuple(layer(x, x, use_causal_mask=True).shape)
    (3, 5, 8)
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
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
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        if value_dim is not None:
            check_positive_int("value_dim", value_dim)
        check_rate("dropout", dropout)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim if value_dim is not None else key_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        read_weight_options(
            self, kernel_regularizer, bias_regularizer, kernel_constraint, bias_constraint
        )
        self.seed = seed
        self.supports_masking = True

    def _projection(self, name, equation, output_shape, bias_axes):
        layer = _Projection(
            contracted_dims=2 if equation.startswith("abcd") else 1,
            equation=equation,
            output_shape=output_shape,
            bias_axes=bias_axes if self.use_bias else None,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            **weight_options(self),
            dtype=self.dtype_policy,
            name=name,
        )
        # Projections act per position, so the padding mask stays valid.
        layer.supports_masking = True
        return layer

    def weights_by_role(self):
        """The layer's variables by role, for converters and weight surgery.

        A method, not properties: a public attribute holding a sublayer
        would move its weights in the files Keras writes, and runs saved
        before it would no longer load.

        Returns:
            A dict: `query_kernel`, `key_kernel` (`[query_dim, heads,
            key_dim]`, `[key_dim_in, heads, key_dim]`), `value_kernel`
            (`[value_dim_in, heads, value_dim]`), `output_kernel` (`[heads,
            value_dim, query_dim]`), and with `use_bias` the biases
            `query_bias`, `key_bias`, `value_bias` (`[heads, dim]`) and
            `output_bias` (`[query_dim]`).

        Example:

        >>> layer = MultiHeadAttention(num_heads=2, key_dim=4)
        >>> _ = layer(keras.ops.ones((1, 3, 8)), keras.ops.ones((1, 3, 8)))
        >>> tuple(layer.weights_by_role()["query_kernel"].shape)
        (8, 2, 4)
        """
        if not self.built:
            raise ValueError(f"{self.name} has no weights before it is built")
        roles = {}
        projections = {"query": self._query_dense, "key": self._key_dense,
                       "value": self._value_dense, "output": self._output_dense}  # fmt: skip
        for role, dense in projections.items():
            roles[f"{role}_kernel"] = dense.kernel
            if self.use_bias:
                roles[f"{role}_bias"] = dense.bias
        return roles

    def build(self, query_shape, value_shape, key_shape=None):
        if key_shape is None:
            key_shape = value_shape
        query_dim = query_shape[-1]
        heads = (None, self.num_heads, self.key_dim)
        self._query_dense = self._projection("query", "abc,cde->abde", heads, "de")
        self._query_dense.build(query_shape)
        self._key_dense = self._projection("key", "abc,cde->abde", heads, "de")
        self._key_dense.build(key_shape)
        self._value_dense = self._projection(
            "value", "abc,cde->abde", (None, self.num_heads, self.value_dim), "de"
        )
        self._value_dense.build(value_shape)
        self._output_dense = self._projection(
            "attention_output", "abcd,cde->abe", (None, query_dim), "e"
        )
        self._output_dense.build((query_shape[0], query_shape[1], self.num_heads, self.value_dim))
        self._dropout_layer = keras.layers.Dropout(
            self.dropout, seed=self.seed, dtype=self.dtype_policy, name="attention_dropout"
        )

    def init_cache(self, batch_size, max_length):
        """Returns an empty self-attention cache.

        Args:
            batch_size: number of sequences decoded together.
            max_length: number of positions the cache holds.

        Returns:
            Zero keys `[batch_size, num_heads, max_length, key_dim]` and
            values `[batch_size, num_heads, max_length, value_dim]`, a
            tuple, in the layer's compute dtype.
        """
        return tuple(
            ops.zeros((batch_size, self.num_heads, max_length, dim), dtype=self.compute_dtype)
            for dim in (self.key_dim, self.value_dim)
        )

    def precompute_cache(self, value, key=None):
        """Projects `value` (and `key`) once, for cached cross-attention.

        Args:
            value: `[batch, key_length, value_dim]`, e.g. the encoder output.
            key: defaults to `value`.

        Returns:
            Keys `[batch, num_heads, key_length, key_dim]` and values
            `[batch, num_heads, key_length, value_dim]`, to pass as `cache`
            with `cache_index=None`.
        """
        if not self.built:
            self.build(value.shape, value.shape, None if key is None else key.shape)
        key = value if key is None else key
        return _heads_first(self._key_dense(key)), _heads_first(self._value_dense(value))

    def call(
        self,
        query,
        value,
        key=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_index=None,
        compiled=False,
        query_mask=None,
        value_mask=None,
        key_mask=None,
    ):
        fused = compiled and cache is not None and cache_index is not None
        fused = fused and key is None and query is value
        if key is None:
            key = value
            key_mask = None
        query_length = ops.shape(query)[1]
        if fused:
            # [batch, query_length, heads, dim] each
            q, new_keys, new_values = self._query_key_value(query)
        else:
            q = self._query_dense(query)  # [batch, query_length, heads, key_dim]

        causal_mask = None
        grouped = False
        # The fused kernel where it computes what the einsums do: no scores
        # to return, no dropout on the weights, no cache (its heads-first
        # layout would be transposed whole at every step), values as wide
        # as keys (the kernels' one head size), and a backend with a kernel
        # of its own (TensorFlow's is these same einsums).
        fuse = (
            cache is None
            and not return_attention_scores
            and self.value_dim == self.key_dim
            and not (training and self.dropout > 0.0)
            and keras.config.backend() != "tensorflow"
        )
        if cache is None:
            k, v = self._key_dense(key), self._value_dense(value)  # [batch, length, heads, dim]
            if not fuse:
                k, v = _heads_first(k), _heads_first(v)  # [batch, heads, key_length, dim]
            if use_causal_mask:
                causal_mask = masking.causal_attention_mask(query_length, ops.shape(key)[1])
        elif cache_index is None:
            # Cross-attention: keys and values were projected once, up front.
            k, v = cache
            rows, cache_rows = query.shape[0], k.shape[0]
            grouped = rows is None or cache_rows is None or rows != cache_rows
            if grouped:
                # Each cache row serves the consecutive query rows (beams)
                # of its source, as one row of more queries.
                cache_rows = ops.shape(k)[0]
                q = _group_rows(q, cache_rows)
                query_mask = _group_rows(query_mask, cache_rows)
                attention_mask = _group_rows(attention_mask, cache_rows)
        else:
            keys, values = cache
            if not fused:
                new_keys, new_values = self._key_dense(key), self._value_dense(value)
            k = _write_cache(keys, cache_index, _heads_first(new_keys), compiled)
            v = _write_cache(values, cache_index, _heads_first(new_values), compiled)
            cache = (k, v)
            # Positions past the ones written hold zeros: decoding with a cache
            # is causal by nature, whatever `use_causal_mask` says.
            causal_mask = masking.causal_attention_mask(
                query_length, ops.shape(k)[2], query_offset=cache_index
            )
            # The step's padding masks do not span the cache.
            value_mask = key_mask = None

        mask = masking.merge_attention_masks(
            query_mask=query_mask,
            value_mask=value_mask,
            key_mask=key_mask,
            attention_mask=attention_mask,
            causal_mask=causal_mask,
        )
        if fuse:
            return self._output_dense(self._fused_attention(q, k, v, mask, causal_mask))
        q = _heads_first(ops.multiply(q, ops.cast(1.0 / math.sqrt(self.key_dim), q.dtype)))
        # [batch, heads, query_length, key_length]
        logits = ops.cast(ops.einsum("bhqd,bhkd->bhqk", q, ops.cast(k, q.dtype)), "float32")
        if mask is not None:
            mask = ops.expand_dims(mask, 1)  # [batch, 1, query_length, key_length]
            logits = ops.where(mask, logits, _LARGE_NEGATIVE)
        scores = _softmax_over_keys(logits)
        if mask is not None and (return_attention_scores or self.dropout > 0.0):
            # keras.layers.MultiHeadAttention zeroes masked weights on this
            # path only, so a fully masked query attends to nothing here.
            scores = ops.where(mask, scores, 0.0)
        scores = ops.cast(scores, self.compute_dtype)
        weights = self._dropout_layer(scores, training=training)
        # [batch, heads, query_length, value_dim]
        context = ops.einsum("bhqk,bhkd->bhqd", weights, ops.cast(v, weights.dtype))
        context = _positions_first(context)  # [batch, query_length, heads, value_dim]
        if grouped:
            context = ops.reshape(context, (-1, query_length, *context.shape[2:]))
            if return_attention_scores:
                # [rows, heads, g * query_length, keys] -> [rows * g, heads, ...]
                heads, keys = scores.shape[1], ops.shape(scores)[3]
                scores = ops.reshape(
                    scores, (-1, heads, ops.shape(scores)[2] // query_length, query_length, keys)
                )
                scores = ops.reshape(
                    ops.transpose(scores, (0, 2, 1, 3, 4)), (-1, heads, query_length, keys)
                )
        output = self._output_dense(context)  # [batch, query_length, query_dim]

        results = (output,)
        if return_attention_scores:
            results += (scores,)
        if cache is not None:
            results += (cache,)
        return results[0] if len(results) == 1 else results

    def _fused_attention(self, q, k, v, mask, causal_mask):
        """`keras.ops.dot_product_attention` of `q`, `k`, `v` (`[batch,
        length, heads, dim]`) under the merged boolean `mask` (`[batch,
        query_length, key_length]`), with the einsum path's answer for a
        query that may attend to no key: the mean of every value (a softmax
        over equal logits), or zeros where the layer has dropout (whose
        path zeroes masked weights), instead of the kernels' NaN."""
        scale = 1.0 / math.sqrt(self.key_dim)
        if mask is None:
            return ops.dot_product_attention(q, k, ops.cast(v, q.dtype), scale=scale)
        if mask is causal_mask and q.shape[1] is not None and q.shape[1] == k.shape[1]:
            # Causal alone, square: the kernels skip the future themselves.
            return ops.dot_product_attention(
                q, k, ops.cast(v, q.dtype), scale=scale, is_causal=True
            )
        attends = ops.any(mask, axis=-1)  # [batch, query_length]
        safe = ops.logical_or(mask, ops.logical_not(attends)[:, :, None])
        context = ops.dot_product_attention(
            q, k, ops.cast(v, q.dtype), mask=safe[:, None], scale=scale
        )
        if self.dropout > 0.0:
            empty = ops.zeros_like(context[:, :1])
        else:
            empty = ops.cast(ops.mean(ops.cast(v, "float32"), axis=1, keepdims=True), context.dtype)
        return ops.where(attends[:, :, None, None], context, empty)

    def _query_key_value(self, x):
        """The query, key and value projections of `x [batch, length,
        d]` as one product against their kernels side by side, each
        returned `[batch, length, heads, dim]` as the projections give it."""
        parts = (self._query_dense, self._key_dense, self._value_dense)
        d_in = x.shape[-1]
        kernel = ops.concatenate([ops.reshape(p.kernel, (d_in, -1)) for p in parts], axis=1)
        y = ops.matmul(ops.reshape(x, (-1, d_in)), ops.cast(kernel, self.compute_dtype))
        if self.use_bias:
            bias = ops.concatenate([ops.reshape(p.bias, (-1,)) for p in parts], axis=0)
            y = y + ops.cast(bias, self.compute_dtype)
        width = self.num_heads * self.key_dim
        length = x.shape[1] if x.shape[1] is not None else ops.shape(x)[1]
        split = (y[:, :width], y[:, width : 2 * width], y[:, 2 * width :])
        return tuple(
            ops.reshape(t, (-1, length, self.num_heads, dim))
            for t, dim in zip(split, (self.key_dim, self.key_dim, self.value_dim))
        )

    def compute_output_shape(self, query_shape, value_shape, key_shape=None, **kwargs):
        return tuple(query_shape)

    def compute_output_spec(
        self,
        query,
        value,
        key=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_index=None,
        **kwargs,
    ):
        output = keras.KerasTensor(query.shape, dtype=self.compute_dtype)
        results = (output,)
        if return_attention_scores:
            key_length = cache[0].shape[2] if cache is not None else value.shape[1]
            shape = (query.shape[0], self.num_heads, query.shape[1], key_length)
            results += (keras.KerasTensor(shape, dtype=self.compute_dtype),)
        if cache is not None:
            results += (tuple(keras.KerasTensor(part.shape, dtype=part.dtype) for part in cache),)
        return results[0] if len(results) == 1 else results

    def get_config(self):
        config = {
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "value_dim": self.value_dim,
            "dropout": self.dropout,
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            **weight_options_config(self),
            "seed": self.seed,
        }
        return {**super().get_config(), **config}
