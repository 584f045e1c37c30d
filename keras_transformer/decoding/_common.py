"""What greedy and beam search share."""

import numbers
from typing import Any, NamedTuple

import tensorflow as tf

from keras_transformer._validation import check_alpha, check_positive_int
from keras_transformer.decoding.generation_config import PENALTIES

# Stands for log(0) without producing NaN in sums.
NEG_INF = -1.0e9


def length_penalty(length, alpha, form="gnmt"):
    """The length penalty of `length` tokens (the end token included).

    `"gnmt"`: `((5 + length) / 6) ** alpha` (Wu et al., 2016; tensor2tensor,
    OpenNMT). `"power"`: `length ** alpha`, the form of Hugging Face's
    `generate()` (`length_penalty`) and of CTranslate2.
    """
    length = tf.cast(length, tf.float32)
    if form == "power":
        return tf.pow(tf.maximum(length, 1.0), alpha)
    return tf.pow((5.0 + length) / 6.0, alpha)


class Rules(NamedTuple):
    """What a search may generate and how it scores it, in token ids: the
    part of a `GenerationConfig` a search reads, fixed when its graph is
    built (`Translator` derives it with the target tokenizer's ids).

    Applied to each step's log-probabilities after the softmax, in the
    order of `generate()`'s logits processors: `banned_ids` are never
    chosen (`bad_words_ids` of one token); a sequence of `suppressed`
    (tuples of two or more ids) is refused where its last token would
    complete it (`bad_words_ids`); with `renormalize`, the tokens left
    share the banned ones' probability (`renormalize_logits`); with
    `forced_end`, the last step can only end, at no cost, as
    `forced_eos_token_id`. A target prefix (`Prefix`) forces its tokens
    over all of these, at no cost (given, as `generate()`'s decoder
    prompt, not chosen).

    Attributes:
        end_id: the end token.
        alpha: length-penalty exponent (0 scores by raw log-probability;
            a negative one favours short hypotheses).
        length_penalty: `"gnmt"`, `((5 + length) / 6) ** alpha`, or
            `"power"`, `length ** alpha`.
        banned_ids: tokens never generated (the padding id; the unknown
            token's with `disable_unk`; suppressed words of one token).
        suppressed: token sequences of two or more ids no hypothesis may
            contain.
        forced_end: the last step can only end.
        renormalize: normalize again once the banned tokens are removed.
    """

    end_id: int
    alpha: float = 0.6
    length_penalty: str = "gnmt"
    banned_ids: tuple = ()
    suppressed: tuple = ()
    forced_end: bool = False
    renormalize: bool = False

    def checked(self):
        """These rules validated, the ids as Python ints (NumPy integers
        are accepted: sizes and ids often come from arrays, and the loop's
        static shapes need plain ints)."""
        if self.length_penalty not in PENALTIES:
            raise ValueError(
                f"`length_penalty` must be one of {PENALTIES}. "
                f"Received: length_penalty={self.length_penalty!r}"
            )
        end_id = as_int(self.end_id)
        _check_id("end_id", end_id)
        check_alpha(self.alpha)
        banned = tuple(as_int(i) for i in self.banned_ids)
        for token in banned:
            _check_id("banned_ids", token)
        suppressed = tuple(tuple(as_int(i) for i in sequence) for sequence in self.suppressed)
        for sequence in suppressed:
            if len(sequence) < 2:
                raise ValueError(
                    "`suppressed`: each sequence has two or more ids (one id is a "
                    f"banned id). Received: {sequence!r}"
                )
            for token in sequence:
                _check_id("suppressed", token)
        return self._replace(end_id=end_id, banned_ids=banned, suppressed=suppressed)


class Prefix(NamedTuple):
    """A target prefix per row, forced through the decoder before the
    search goes on freely (CTranslate2's `target_prefix`)."""

    ids: Any  # [batch, length] int32: each row's prefix, then anything
    lengths: Any  # [batch] int32: the prefix's tokens in each row (0: none)

    def forced(self, index):
        """`(tokens [batch], active [batch] bool)`: the token each row must
        take at position `index`, and whether it must."""
        ids = tf.cast(self.ids, tf.int32)
        width = tf.shape(ids)[1]
        tokens = tf.gather(ids, tf.minimum(index, tf.maximum(width - 1, 0)), axis=1)
        active = tf.logical_and(index < tf.cast(self.lengths, tf.int32), index < width)
        return tf.where(active, tokens, 0), active

    def tiled(self, beams):
        """The prefix of each row repeated for its `beams` hypotheses."""
        return Prefix(tf.repeat(self.ids, beams, axis=0), tf.repeat(self.lengths, beams, axis=0))


def restrict(log_probs, index, max_length, rules, history=None, prefix=None):
    """Applies `rules` (`Rules`) to one step's log-probabilities
    `[rows, vocab]` at position `index` of at most `max_length`.

    Args:
        history: `[rows, max_length]` the tokens generated so far (0 from
            `index` on), which `rules.suppressed` are matched against.
        prefix: a `Prefix` of `rows` rows, or None.
    """
    vocab = tf.shape(log_probs)[-1]
    if rules.banned_ids:
        banned = tf.reduce_any(
            tf.range(vocab)[:, None] == tf.constant(rules.banned_ids, tf.int32)[None, :], axis=1
        )  # [vocab]
        log_probs = tf.where(banned, NEG_INF, log_probs)
    if rules.suppressed:
        completing = suppressed_tokens(history, index, rules.suppressed, vocab)
        log_probs = tf.where(completing, NEG_INF, log_probs)
    if rules.renormalize:
        log_probs = log_probs - tf.reduce_logsumexp(log_probs, axis=-1, keepdims=True)
    if rules.forced_end:
        forced = tf.where(tf.range(vocab) == rules.end_id, 0.0, NEG_INF)
        log_probs = tf.where(index >= max_length - 1, forced, log_probs)
    if prefix is not None:
        tokens, active = prefix.forced(index)  # [rows]

        def force():
            only = tf.one_hot(tokens, vocab, on_value=0.0, off_value=NEG_INF)  # [rows, vocab]
            return tf.where(active[:, None], only, log_probs)

        # Past every row's prefix (and for an empty one, always) the step
        # pays nothing: measured, the compiled prefix search wrote the
        # [rows, vocab] selects at every step, 7-10% over a plain search.
        log_probs = tf.cond(tf.reduce_any(active), force, lambda: log_probs)
    return log_probs


def suppressed_tokens(history, index, sequences, vocab):
    """`[rows, vocab]` bool: the tokens that would complete one of
    `sequences` (tuples of two or more ids) at position `index`, where the
    tokens before it in `history [rows, max_length]` are the sequence's
    others."""
    width = max(len(s) for s in sequences) - 1
    heads = tf.constant([list(s[:-1]) + [0] * (width + 1 - len(s)) for s in sequences], tf.int32)
    needed = tf.constant([len(s) - 1 for s in sequences], tf.int32)  # [n]
    lasts = tf.constant([s[-1] for s in sequences], tf.int32)  # [n]
    j = tf.range(width)
    positions = index - needed[:, None] + j[None, :]  # [n, width]
    used = j[None, :] < needed[:, None]  # [n, width]
    safe = tf.clip_by_value(positions, 0, tf.shape(history)[1] - 1)
    tokens = tf.gather(history, tf.reshape(safe, [-1]), axis=1)  # [rows, n * width]
    tokens = tf.reshape(tokens, [-1, len(sequences), width])  # [rows, n, width]
    same = tf.logical_and(tf.equal(tokens, heads[None]), (positions >= 0)[None])
    match = tf.reduce_all(tf.logical_or(same, tf.logical_not(used)[None]), axis=-1)  # [rows, n]
    # Each matching sequence bans its last token: [rows, n] x [n, vocab].
    hits = tf.matmul(tf.cast(match, tf.float32), tf.one_hot(lasts, vocab))
    return hits > 0


def check_arguments(beam_size, max_length, rules):
    """Validates a search's sizes and rules; returns them as Python ints
    and checked `Rules`."""
    if not isinstance(rules, Rules):
        raise ValueError(f"`rules` must be a `Rules`. Received: rules={rules!r}")
    beam_size, max_length = as_int(beam_size), as_int(max_length)
    for name, value in (("beam_size", beam_size), ("max_length", max_length)):
        check_positive_int(name, value)
    return beam_size, max_length, rules.checked()


def _check_id(name, value):
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"`{name}` must hold non-negative ints. Received: {name}={value!r}")


def as_int(value):
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


def write_position(sequences, index, tokens):
    """Writes `tokens [...]` at position `index` of `sequences [..., length]`."""
    length = tf.shape(sequences)[-1]
    at_index = tf.one_hot(index, length, dtype=sequences.dtype)  # [length]
    return sequences * (1 - at_index) + tokens[..., None] * at_index


def zero_after_end(sequences, end_id):
    """Pads with 0 everything after the first `end_id` of each sequence."""
    is_end = tf.cast(tf.equal(sequences, end_id), tf.int32)
    ended_before = tf.math.cumsum(is_end, axis=-1, exclusive=True) > 0
    return tf.where(ended_before, tf.zeros_like(sequences), sequences)


def top_k(values, k, block=64):
    """`tf.math.top_k` of each row's values, faster for many values.

    `values` is `[rows, n]`, or `[rows, parts, n]` (a beam search's
    candidates: one part per beam), whose best `k` are taken over each
    row's `parts * n` values as if flattened, index `part * n + i`.

    The best `k` of all values lie in the `k` blocks (of `block` values)
    with the best maxima: one pass of block maxima, a top-k over them and
    one over the `k * block` values of the chosen blocks replace a top-k
    over all (measured: 5x faster at 32 rows of 32,000, compiled or not).
    Blocks lie within a part, and a part's last block may be short: a
    vocabulary that is not a multiple of `block` is read in place, not
    copied into a padded array (compiled, one thread, 32 rows of 4 x 58,001
    candidates: the log-softmax and top-k took 23 ms padded, 7.8 ms in
    place). The chosen blocks are read in index order, so ties resolve as
    `tf.math.top_k` resolves them (the lower index first) and the results
    are identical. Falls back to `tf.math.top_k` when `n` is unknown or the
    values are few.

    Returns:
        `(values [rows, k], indices [rows, k] int32)`, best first.
    """
    parts = values.shape[1] if values.shape.rank == 3 else 1
    n = values.shape[-1]
    flat = tf.reshape(values, [tf.shape(values)[0], -1])  # [rows, parts * n]
    if n is None or parts is None or n < block or parts * n < 4 * k * block:
        return tf.math.top_k(flat, k=k)
    values = tf.reshape(values, [-1, parts, n])
    full = n // block
    whole = tf.reshape(values[:, :, : full * block], [-1, parts, full, block])
    maxima = tf.reduce_max(whole, axis=-1)  # [rows, parts, blocks]
    if full * block < n:
        last = tf.reduce_max(values[:, :, full * block :], axis=-1, keepdims=True)
        maxima = tf.concat([maxima, last], axis=-1)
    blocks = maxima.shape[-1]
    _, best = tf.math.top_k(tf.reshape(maxima, [-1, parts * blocks]), k=k)  # [rows, k]
    best = tf.sort(best, axis=-1)
    within = (best % blocks)[:, :, None] * block + tf.range(block)  # [rows, k, block]
    indices = (best // blocks)[:, :, None] * n + tf.minimum(within, n - 1)
    indices = tf.reshape(indices, [-1, k * block])
    candidates = tf.gather(flat, indices, batch_dims=1)
    # A short last block's places past `n` read -inf: they follow its own
    # values, so they are picked only where -inf values are, as ties the
    # lower index first (checked against `tf.math.top_k` with -inf values).
    candidates = tf.where(tf.reshape(within < n, [-1, k * block]), candidates, float("-inf"))
    top, picked = tf.math.top_k(candidates, k=k)
    return top, tf.gather(indices, picked, batch_dims=1)


def state_lengths(max_length, first=16, steps_until=None):
    """The lengths a growing step state runs through (`loop_in_segments`):
    from `first`, in steps of `first` up to `steps_until` (if given), then
    doubling, then `max_length`; `[max_length]` alone when it is at most
    `first`."""
    lengths, length = [], first
    while length < max_length:
        lengths.append(length)
        length += first if steps_until is not None and length < steps_until else length
    return lengths + [max_length]


def grow_caches(state, length):
    """`state` with each tensor of its `"self_attention_cache"` (the
    decoder's keys and values, `[rows, heads, length, head_dim]`) holding
    `length` positions, the written ones kept and zeros after them.

    The searches' `grow_state` for a step that reads the caches' length
    from their shape.
    """

    def resize(cache):
        extra = length - cache.shape[2]
        if extra <= 0:
            return cache[:, :, :length]
        return tf.pad(cache, [[0, 0], [0, 0], [0, extra], [0, 0]])

    caches = tf.nest.map_structure(resize, state["self_attention_cache"])
    return {**state, "self_attention_cache": caches}


def grown_lengths(max_length, lengths=None):
    """The lengths a growing state runs through: `lengths` (ascending, those
    below `max_length` kept) then `max_length`, or `state_lengths(max_length)`
    when None."""
    if lengths is None:
        return state_lengths(max_length)
    lengths = [as_int(n) for n in lengths]
    for n in lengths:
        check_positive_int("grow_lengths", n)
    lengths = sorted(set(lengths))
    return [n for n in lengths if n < max_length] + [max_length]


def loop_in_segments(
    not_done, body, initial, max_length, grow_state, invariants=None, lengths=None
):
    """`tf.while_loop(not_done, body, (initial,))` over a loop state with
    `.i` (the position being generated) and `.state` (the step function's);
    returns the loop state at the end.

    With `grow_state`, the loop runs in segments, one per length of
    `grown_lengths(max_length, lengths)` (by default doubling from 16):
    before each, `grow_state(state, length)`
    makes the step's state hold `length` positions, and the segment runs
    while `i < length`. A step whose caches are read and reordered whole
    at every step (fixed shapes, as XLA needs them) then pays for a short
    output as for short caches, not for `max_length` positions. A search
    done within a segment grows nothing more, and the loop state it
    returns holds no step state (`.state` is `()`).
    `invariants(state)`: the loop's shape invariants, from the state of
    the segment.
    """

    def run(s, cond, limit):
        options = {"maximum_iterations": limit}
        if invariants is not None:
            options["shape_invariants"] = (invariants(s.state),)
        (s,) = tf.while_loop(cond, body, (s,), **options)
        return s

    if grow_state is None:
        return run(initial, not_done, max_length)

    def segments(s, lengths):
        length, rest = lengths[0], lengths[1:]
        s = s._replace(state=grow_state(s.state, length))
        s = run(s, lambda s: tf.logical_and(not_done(s), s.i < length), length)
        if not rest:
            return s._replace(state=())
        return tf.cond(not_done(s), lambda: segments(s, rest), lambda: s._replace(state=()))

    return segments(initial, grown_lengths(max_length, lengths))
