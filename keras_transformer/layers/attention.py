"""Multi-head attention with full mask handling and a fixed-size cache."""

import math

import keras
from keras import ops

from keras_transformer._validation import check_positive_int
from keras_transformer.layers import masking
from keras_transformer.layers._initializers import clone_initializer

# Added to the logits of masked keys before the softmax, which runs in float32.
_LARGE_NEGATIVE = -1e9


def _write_cache(cache, index, new):
    """Writes `new [batch, 2, step, ...]` into `cache` at positions `index...`.

    A positional select rather than `ops.slice_update`: on TensorFlow the
    latter lowers to `XlaDynamicUpdateSlice`, which needs XLA, and exported
    models must run in TensorFlow Serving without it.
    """
    max_length = ops.shape(cache)[2]
    index = ops.cast(index, "int32")
    if new.shape[2] == 1:
        # Incremental decoding: a scatter of the step's rows, which
        # TensorFlow can do in place, where a select rewrites (and
        # broadcasts over) the whole cache at every step.
        rows = ops.shape(cache)[0] * 2
        flat = ops.reshape(cache, (-1, *cache.shape[2:]))  # [batch * 2, max_length, ...]
        indices = ops.stack(
            [ops.arange(rows, dtype="int32"), ops.full((rows,), index, dtype="int32")], axis=1
        )
        updates = ops.reshape(new, (-1, *new.shape[3:]))  # [batch * 2, heads, dim]
        return ops.reshape(ops.scatter_update(flat, indices, updates), ops.shape(cache))
    positions = ops.arange(max_length, dtype="int32")  # [max_length]
    step = ops.shape(new)[2]
    in_window = ops.logical_and(positions >= index, positions < index + step)
    source = ops.clip(positions - index, 0, step - 1)
    placed = ops.take(new, source, axis=2)  # [batch, 2, max_length, heads, dim]
    return ops.where(in_window[None, None, :, None, None], placed, cache)


def _split_cache(cache):
    """`[batch, 2, length, heads, dim]` -> keys and values `[batch, length, heads, dim]`.

    Sliced as `[batch, 2, length * heads * dim]`: on TensorFlow a slice of
    the five-dimensional cache runs through the generic strided copy (over
    100 us a step for a 128 KB half at batch 1), a slice of its flat view
    copies whole contiguous rows.
    """
    inner = tuple(cache.shape[2:])
    if any(d is None for d in inner):
        return cache[:, 0], cache[:, 1]
    flat = ops.reshape(cache, (-1, 2, math.prod(inner)))
    return ops.reshape(flat[:, 0], (-1, *inner)), ops.reshape(flat[:, 1], (-1, *inner))


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
        if all(d is not None for d in inner):  # e.g. decoding's one position
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

    Cache: `init_cache(batch_size, max_length)` returns a zero tensor
    `[batch, 2, max_length, num_heads, key_dim]` (index 0 holds keys, 1
    values). Called with `cache` and `cache_index`, the layer projects the new
    `value`/`key` positions, writes them at `cache_index`, and attends over
    the cache causally: query `i` sees cache
    positions `<= cache_index + i`. Called with `cache` and no `cache_index`,
    the cache is read as precomputed keys and values (cross-attention, see
    `precompute_cache`) and is not changed. With a cache the call returns
    `(output, cache)`, or `(output, scores, cache)` with scores.

    Args:
        num_heads: number of attention heads.
        key_dim: size of each head for query and key.
        value_dim: size of each head for value; defaults to `key_dim`.
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections use a bias.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the projection biases.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

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
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        if value_dim is not None:
            check_positive_int("value_dim", value_dim)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout!r}")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim if value_dim is not None else key_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def _projection(self, name, equation, output_shape, bias_axes):
        layer = _Projection(
            contracted_dims=2 if equation.startswith("abcd") else 1,
            equation=equation,
            output_shape=output_shape,
            bias_axes=bias_axes if self.use_bias else None,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        # Projections act per position, so the padding mask stays valid.
        layer.supports_masking = True
        return layer

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
            self.dropout, dtype=self.dtype_policy, name="attention_dropout"
        )

    def init_cache(self, batch_size, max_length):
        """Returns an empty self-attention cache.

        Args:
            batch_size: number of sequences decoded together.
            max_length: number of positions the cache holds.

        Returns:
            Zeros of shape `[batch_size, 2, max_length, num_heads, key_dim]`
            in the layer's compute dtype.
        """
        self._check_cacheable()
        return ops.zeros(
            (batch_size, 2, max_length, self.num_heads, self.key_dim),
            dtype=self.compute_dtype,
        )

    def precompute_cache(self, value, key=None):
        """Projects `value` (and `key`) once, for cached cross-attention.

        Args:
            value: `[batch, key_length, value_dim]`, e.g. the encoder output.
            key: defaults to `value`.

        Returns:
            `[batch, 2, key_length, num_heads, key_dim]`, to pass as `cache`
            with `cache_index=None`.
        """
        self._check_cacheable()
        if not self.built:
            self.build(value.shape, value.shape, None if key is None else key.shape)
        key = value if key is None else key
        return ops.stack([self._key_dense(key), self._value_dense(value)], axis=1)

    def _check_cacheable(self):
        if self.value_dim != self.key_dim:
            raise ValueError(
                "The key/value cache needs `value_dim == key_dim`. Received: "
                f"key_dim={self.key_dim}, value_dim={self.value_dim}"
            )

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
        query_mask=None,
        value_mask=None,
        key_mask=None,
    ):
        if key is None:
            key = value
            key_mask = None
        query_length = ops.shape(query)[1]
        q = self._query_dense(query)  # [batch, query_length, heads, key_dim]

        causal_mask = None
        if cache is None:
            k = self._key_dense(key)  # [batch, key_length, heads, key_dim]
            v = self._value_dense(value)  # [batch, key_length, heads, value_dim]
            if use_causal_mask:
                causal_mask = masking.causal_attention_mask(query_length, ops.shape(k)[1])
        elif cache_index is None:
            # Cross-attention: keys and values were projected once, up front.
            self._check_cacheable()
            k, v = _split_cache(cache)
        else:
            self._check_cacheable()
            new = ops.stack([self._key_dense(key), self._value_dense(value)], axis=1)
            new = ops.cast(new, cache.dtype)  # [batch, 2, step, heads, key_dim]
            cache = _write_cache(cache, cache_index, new)
            k, v = _split_cache(cache)  # [batch, max_length, heads, key_dim]
            # Positions past the ones written hold zeros: decoding with a cache
            # is causal by nature, whatever `use_causal_mask` says.
            causal_mask = masking.causal_attention_mask(
                query_length, ops.shape(k)[1], query_offset=cache_index
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

        q = ops.multiply(q, ops.cast(1.0 / math.sqrt(self.key_dim), q.dtype))
        if cache is not None and query.shape[1] == 1:
            context, scores = self._attend_one_query(
                q, k, v, mask, return_attention_scores, training
            )
            output = self._output_dense(context)
            results = (output, scores) if return_attention_scores else (output,)
            return results + (cache,)
        # [batch, heads, query_length, key_length]
        logits = ops.cast(ops.einsum("aecd,abcd->acbe", k, q), "float32")
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
        # [batch, query_length, heads, value_dim]
        context = ops.einsum("acbe,aecd->abcd", weights, ops.cast(v, weights.dtype))
        output = self._output_dense(context)  # [batch, query_length, query_dim]

        results = (output,)
        if return_attention_scores:
            results += (scores,)
        if cache is not None:
            results += (cache,)
        return results[0] if len(results) == 1 else results

    def _attend_one_query(self, q, k, v, mask, return_attention_scores, training):
        """Attention of a single query position over a cache.

        The same numbers as the general path, in elementwise products and
        sums over the cache axis. Decoding runs this once per generated
        token on tiny tensors, where the general path's einsums (transposes
        and batched matmuls) and softmax cost far more in per-op overhead
        than in arithmetic, especially as oneDNN kernels.

        Args:
            q: scaled queries `[batch, 1, heads, key_dim]`.
            k, v: `[batch, key_length, heads, key_dim]`.
            mask: merged mask `[batch or 1, 1, key_length]` or None.

        Returns:
            `(context [batch, 1, heads, value_dim], scores)`, scores
            `[batch, heads, 1, key_length]` when requested, else None.
        """
        logits = ops.sum(ops.cast(k, "float32") * ops.cast(q, "float32"), axis=-1)
        # logits: [batch, key_length, heads]; the softmax runs over axis 1.
        if mask is not None:
            mask = ops.expand_dims(mask[:, 0, :], -1)  # [batch, key_length, 1]
            logits = ops.where(mask, logits, _LARGE_NEGATIVE)
        weights = ops.exp(logits - ops.max(logits, axis=1, keepdims=True))
        weights = weights / ops.sum(weights, axis=1, keepdims=True)
        if mask is not None and (return_attention_scores or self.dropout > 0.0):
            weights = ops.where(mask, weights, 0.0)  # as the general path
        weights = ops.cast(weights, self.compute_dtype)
        scores = None
        if return_attention_scores:
            scores = ops.expand_dims(ops.transpose(weights, (0, 2, 1)), 2)
        dropped = ops.cast(self._dropout_layer(weights, training=training), "float32")
        # [batch, key_length, heads, 1] * [batch, key_length, heads, value_dim]
        context = ops.sum(ops.expand_dims(dropped, -1) * ops.cast(v, "float32"), axis=1)
        context = ops.cast(ops.expand_dims(context, 1), self.compute_dtype)
        return context, scores

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
            key_length = cache.shape[2] if cache is not None else value.shape[1]
            shape = (query.shape[0], self.num_heads, query.shape[1], key_length)
            results += (keras.KerasTensor(shape, dtype=self.compute_dtype),)
        if cache is not None:
            results += (keras.KerasTensor(cache.shape, dtype=cache.dtype),)
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
        }
        return {**super().get_config(), **config}
