"""Accuracy over non-padding target tokens."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(keras.metrics.Metric):
    """Fraction of non-padding target tokens whose argmax is right.

    Accumulates counts over batches (so the epoch value weights every token
    equally, not every batch); a Keras mask on the predictions is ignored.

    Args:
        pad_id: the id of padding in `y_true`.
        name: metric name.
        **kwargs: base metric arguments.

    Example:

    >>> metric = MaskedAccuracy()
    >>> y_true = np.array([[1, 2, 0]])  # the last token is padding
    >>> y_pred = np.eye(3)[[[1, 0, 2]]]  # right, wrong, (padding)
    >>> metric.update_state(y_true, y_pred)
    >>> float(metric.result())
    0.5
    """

    def __init__(self, pad_id=0, name="masked_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        if not isinstance(pad_id, int) or isinstance(pad_id, bool):
            raise ValueError(f"`pad_id` must be an int. Received: pad_id={pad_id!r}")
        self.pad_id = pad_id
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        weights = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        if sample_weight is not None:
            sample_weight = ops.cast(sample_weight, "float32")
            while len(sample_weight.shape) < len(weights.shape):
                sample_weight = ops.expand_dims(sample_weight, -1)
            weights = weights * sample_weight
        hits = ops.cast(ops.equal(y_true, predicted), "float32") * weights
        self.correct.assign_add(ops.sum(hits))
        self.total.assign_add(ops.sum(weights))

    def result(self):
        return ops.divide_no_nan(self.correct, self.total)

    def reset_state(self):
        self.correct.assign(0.0)
        self.total.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}
