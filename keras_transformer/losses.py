"""Cross-entropy over non-padding target tokens, with label smoothing."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Token cross-entropy averaged over the tokens that are not padding.

    Label smoothing as in the paper (Szegedy et al., 2016): the target
    distribution is `(1 - eps) * one_hot + eps / vocab_size`, i.e. the `eps`
    mass is spread uniformly over the whole vocabulary. The mean runs over
    the positions where `y_true != pad_id` (weighted by `sample_weight` when
    given); a Keras mask carried on the logits is ignored, so the loss means
    the same whatever produced the logits.

    Args:
        from_logits: whether `y_pred` are logits (else probabilities).
        label_smoothing: `eps` in [0, 1).
        pad_id: the id of padding in `y_true`.
        name: loss name.
        **kwargs: base loss arguments (`reduction` is fixed: a scalar mean).

    Example:

    >>> loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)
    >>> y_true = np.array([[4, 2, 0]])  # the last token is padding
    >>> uniform = np.zeros((1, 3, 5))  # logits: every token equally likely
    >>> round(float(loss(y_true, uniform)), 4)  # log(5), padding left out
    1.6094
    """

    def __init__(
        self,
        from_logits=True,
        label_smoothing=0.0,
        pad_id=0,
        name="masked_sparse_categorical_crossentropy",
        **kwargs,
    ):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum_over_batch_size", **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                "`label_smoothing` must be in [0, 1). "
                f"Received: label_smoothing={label_smoothing!r}"
            )
        if not isinstance(pad_id, int) or isinstance(pad_id, bool):
            raise ValueError(f"`pad_id` must be an int. Received: pad_id={pad_id!r}")
        self.from_logits = from_logits
        self.label_smoothing = float(label_smoothing)
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        """Per-token losses `[batch, length]`, zero at padding."""
        y_true = ops.cast(y_true, "int32")
        y_pred = ops.cast(y_pred, "float32")
        if self.from_logits:
            log_probs = ops.log_softmax(y_pred, axis=-1)
        else:
            log_probs = ops.log(ops.clip(y_pred, 1e-7, 1.0))
        vocab_size = ops.shape(y_pred)[-1]
        one_hot = ops.one_hot(y_true, vocab_size, dtype="float32")
        eps = self.label_smoothing
        targets = one_hot * (1.0 - eps) + eps / ops.cast(vocab_size, "float32")
        losses = -ops.sum(targets * log_probs, axis=-1)
        return losses * ops.cast(ops.not_equal(y_true, self.pad_id), "float32")

    def __call__(self, y_true, y_pred, sample_weight=None):
        losses = self.call(y_true, y_pred)
        weights = ops.cast(ops.not_equal(ops.cast(y_true, "int32"), self.pad_id), "float32")
        if sample_weight is not None:
            sample_weight = ops.cast(sample_weight, "float32")
            while len(sample_weight.shape) < len(weights.shape):
                sample_weight = ops.expand_dims(sample_weight, -1)
            weights = weights * sample_weight
            losses = losses * sample_weight
        return ops.sum(losses) / ops.maximum(ops.sum(weights), 1e-9)

    def get_config(self):
        # The base config too (name, reduction); `reduction` is fixed and is
        # dropped again by `__init__`, so older configs load as before.
        return {
            **super().get_config(),
            "from_logits": self.from_logits,
            "label_smoothing": self.label_smoothing,
            "pad_id": self.pad_id,
        }
