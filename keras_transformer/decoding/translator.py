"""Strings in, translations out: tokenizers, model and search in one module."""

import functools

import tensorflow as tf

from keras_transformer._validation import check_positive_int
from keras_transformer.data.tokenizer import END_ID, PAD_ID, START_ID, UNK_ID
from keras_transformer.decoding import _common
from keras_transformer.decoding._common import Prefix, Rules
from keras_transformer.decoding.beam_search import beam_search
from keras_transformer.decoding.compiled_shapes import check_compiled_shapes
from keras_transformer.decoding.generation_config import GenerationConfig
from keras_transformer.decoding.greedy import greedy_search
from keras_transformer.decoding.sampling import sample_search
from keras_transformer.decoding.shape_runner import ShapeRunner

# The searches' self-attention caches grow with the translation, doubling
# up to `max_output_length`: a short translation reads (and beam search
# reorders) short caches, and a long limit (an imported checkpoint's 511)
# costs a translation only the next power of two. Each length is a loop of
# its own in every search: the graph executor, for which a short cache
# saves less, starts at 32 (fewer loops; from 16 it ran 32-token
# translations 8-10% slower). XLA, whose beam search reorders the whole
# caches every step, goes 8, 16, 24, 32 first, where most sentences end,
# then doubles: beam 4 at batch 32 (OPUS-MT's shape, 32 tokens) took 2%
# less than from 16, for two loops more to compile.
CACHE_LENGTHS = {"plain": dict(first=32), "compiled": dict(first=8, steps_until=32)}

# The searches encode their sources in this many groups of rows of similar
# length, each padded only to its own longest row (as CTranslate2 spares
# the encoder the padding): 32 Multi30k sentences padded to 48 tokens hold
# 1,536 positions, 484 of them real; four groups hold 608.
ENCODER_GROUPS = 4


class Translator(tf.Module):
    """Translates raw text with a trained `Transformer` and its tokenizers.

    Inputs longer than the config's `max_input_length` tokens are truncated
    (keeping the end token); translations stop at `max_output_length`
    tokens. Empty
    (or blank) input gives empty output, scored 0 with no ids, as
    CTranslate2's empty result. The translator leaves the model it is given
    as it was: it only calls it.

    Args:
        model: a trained `keras_transformer.models.Transformer`.
        source_tokenizer, target_tokenizer: `SubwordTokenizer`s of the run.
        generation: a `GenerationConfig`: the beams of `translate`, the
            length penalty, the output and input caps (each at most the
            model's `max_length`), the sampling of `translate_sample`, and
            the constraints (`suppress_sequences`, `disable_unk`; padding
            is never generated). Default: `GenerationConfig()`.
        jit_compile: run the id-level work (search loops, the scoring
            pass) compiled with XLA, in the fixed shapes of a `ShapeRunner`
            (`shapes`): rows in chunks padded to `batch_sizes`, tokens
            padded to `lengths`. XLA compiles one program per shape, so the
            programs are few and known (`compiled_shapes`). Either way the
            step is the model's own `decode_step`; compiled, its caches are
            written in place. The searches' encoder runs outside the
            programs, in groups of rows of similar length (`encode_rows`),
            whose shapes no program could fix.
        batch_sizes: the batch sizes requests are cut and padded to (as TF
            Serving's `allowed_batch_sizes`; default `(1, 8, 32)`).
        lengths: the token lengths of the compiled programs (default
            `(16, 24, 32, 48, 64, 96, ...)` up to the longest input or
            translation); the longest is always included.
        split_batches: run a compiled chunk of two rows or more as two
            programs at once, one per half (see `ShapeRunner`; default).
        **settings: fields of `GenerationConfig` over `generation`'s
            (`beam_size=5`), as `generate(**kwargs)` over its
            `generation_config`.

    Example:

    >>> translator = Translator(model, source_tokenizer, target_tokenizer)
    >>> outputs = translator.translate(tf.constant(["The child takes the woman."]))
    >>> sorted(outputs), outputs["translation"].dtype
    (['score', 'translation'], tf.string)
    """

    def __init__(
        self,
        model,
        source_tokenizer,
        target_tokenizer,
        generation=None,
        *,
        jit_compile=False,
        batch_sizes=None,
        lengths=None,
        split_batches=True,
        name=None,
        **settings,
    ):
        super().__init__(name=name)
        if generation is not None and not isinstance(generation, GenerationConfig):
            raise ValueError(
                f"`generation` must be a GenerationConfig. Received: generation={generation!r}"
            )
        generation = (generation or GenerationConfig()).merged(**settings)
        limit = model.max_length
        self.max_length = int(limit)
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.generation = generation
        self.beam_size = generation.beam_size
        self.max_input_length = min(generation.max_input_length, self.max_length)
        self.max_output_length = min(generation.max_output_length, self.max_length)
        self._check_beam_size(self.beam_size)
        self.rules = self._rules(generation)
        check_compiled_shapes(jit_compile, batch_sizes, lengths, split_batches)
        self.jit_compile = bool(jit_compile)
        self.shapes = ShapeRunner(
            batch_sizes,
            lengths,
            longest=max(self.max_input_length, self.max_output_length),
            split_batches=split_batches,
        )
        self._compiled = {}
        # One trace of the encoder for every group and signature: an
        # export traced it four times a search signature (6 s more for the
        # demo's model).
        self._encode_group = tf.function(
            lambda ids: self.model.encode(ids, training=False),
            input_signature=[tf.TensorSpec([None, None], tf.int32)],
            autograph=False,
        )

    def _rules(self, generation):
        """The searches' `Rules`: the config's, in the target tokenizer's
        ids. A suppressed phrase of one token is a banned id."""
        banned = [PAD_ID] + ([UNK_ID] if generation.disable_unk else [])
        sequences = []
        for ids in generation.suppressed_ids(self.target_tokenizer):
            if len(ids) == 1:
                banned += ids
            else:
                sequences.append(tuple(ids))
        return Rules(
            end_id=END_ID,
            alpha=generation.alpha,
            length_penalty=generation.length_penalty,
            banned_ids=tuple(dict.fromkeys(banned)),
            suppressed=tuple(dict.fromkeys(sequences)),
            forced_end=generation.forced_end,
            renormalize=generation.renormalize,
        ).checked()

    def encode_prefix(self, target_prefix):
        """`[batch]` strings -> `Prefix` of the target tokenizer's ids,
        `[batch, max_output_length]`; refuses a prefix that is not UTF-8
        or is longer than `max_output_length` tokens."""
        target_prefix = tf.reshape(tf.convert_to_tensor(target_prefix, tf.string), [-1])
        repaired = tf.strings.unicode_transcode(target_prefix, "UTF-8", "UTF-8", errors="replace")
        valid = tf.debugging.assert_equal(
            repaired, target_prefix, message="`target_prefix` is not valid UTF-8"
        )
        with tf.control_dependencies([valid]):
            ids = self.target_tokenizer.tokenize(target_prefix)
        lengths = tf.cast(ids.row_lengths(), tf.int32)
        fits = tf.debugging.assert_less_equal(
            lengths,
            self.max_output_length,
            message=f"`target_prefix` is longer than max_output_length "
            f"({self.max_output_length} tokens)",
        )
        with tf.control_dependencies([fits]):
            lengths = tf.identity(lengths)
        ids = ids.to_tensor(0, shape=[None, self.max_output_length])
        return Prefix(tf.cast(ids, tf.int32), lengths)

    def encode_text(self, text, max_length=None):
        """`[batch]` strings -> padded source ids `[batch, length]`, each
        cut to `max_length` tokens, end token included (default
        `max_input_length`)."""
        ids = self.source_tokenizer.tokenize(text)
        ids = ids[:, : (max_length or self.max_input_length) - 1]
        end = tf.fill([ids.nrows(), 1], END_ID)
        ids = tf.concat([ids, end], axis=1)
        return ids.to_tensor(default_value=0)  # [batch, source_length]

    def encode_rows(self, source_ids):
        """The model's encoder output for padded `source_ids [batch,
        length]`, `[batch, length, d_model]`, computed in `ENCODER_GROUPS`
        groups of rows of similar length, each cut to its longest row:
        the encoder does not work on padding that whole-batch encoding
        would give it. Positions past a row's length hold padding (which
        the decoder masks)."""
        source_ids = tf.cast(source_ids, tf.int32)
        batch, width = tf.shape(source_ids)[0], tf.shape(source_ids)[1]
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.int32), axis=1)
        order = tf.argsort(lengths, stable=True)  # [batch]
        size = (batch + ENCODER_GROUPS - 1) // ENCODER_GROUPS
        dtype = self.model.compute_dtype
        groups = []
        for group in range(ENCODER_GROUPS):
            rows = order[group * size : (group + 1) * size]  # [size] or fewer
            # The group's width: its longest row, at least 1, at most the batch's.
            longest = tf.reduce_max(tf.concat([tf.gather(lengths, rows), [1]], axis=0))
            longest = tf.minimum(longest, width)

            def encode(rows=rows, longest=longest):
                return self._encode_group(tf.gather(source_ids, rows)[:, :longest])

            # A request of fewer rows than groups runs no encoder for the rest.
            encoded = tf.cond(
                tf.size(rows) > 0,
                encode,
                lambda longest=longest: tf.zeros([0, longest, self.model.d_model], dtype),
            )  # [rows, longest, d_model]
            groups.append(tf.pad(encoded, [[0, 0], [0, width - longest], [0, 0]]))
        # Back from length order to the request's.
        return tf.gather(tf.concat(groups, axis=0), tf.argsort(order))

    @property
    def batch_sizes(self):
        """The batch sizes compiled requests are cut and padded to."""
        return self.shapes.batch_sizes

    @property
    def lengths(self):
        """The token lengths of the compiled programs."""
        return self.shapes.lengths

    @property
    def program_batch_sizes(self):
        """The batch sizes the programs are compiled for (half of each of
        `batch_sizes` when batches are split)."""
        return self.shapes.program_batch_sizes

    @property
    def compiled_shapes(self):
        """The input shapes `(batch, length)` of the compiled programs: each
        compiled search and the scoring pass run once per shape."""
        return self.shapes.shapes

    @property
    def compiled_searches(self):
        """What the signatures compile, one program per shape each: beam
        search (none apart when `beam_size` is 1: it is greedy search),
        greedy search, sampling, the scoring pass and the search that
        continues a target prefix."""
        searches = ["beam search"] if self.beam_size > 1 else []
        return searches + ["greedy search", "sampling", "scoring pass", "prefix search"]

    def _search(self, source_ids, beam_size, sample=False, seed=None, prefix=None):
        if not self.jit_compile:
            encoded = self.encode_rows(source_ids)
            return self._search_ids(source_ids, encoded, beam_size, sample, seed, prefix)
        key = ("sample", None) if sample else ("search", beam_size, prefix is not None)
        if key not in self._compiled:
            if sample:
                fn = functools.partial(self._search_ids, beam_size=1, sample=True)
            else:
                fn = functools.partial(self._search_ids, beam_size=beam_size)
            self._compiled[key] = tf.function(fn, jit_compile=True, autograph=False)
        fn = self._compiled[key]
        if prefix is not None:
            source_ids = self.shapes.pad_length(source_ids, tf.shape(source_ids)[1])
            return self.shapes.run(
                lambda first, rows, encoded, ids, lengths: fn(
                    rows, encoded, prefix=Prefix(ids, lengths)
                ),
                [source_ids, self.encode_rows(source_ids), *prefix],
                [([beam_size, self.max_output_length], tf.int32), ([beam_size], tf.float32)],
            )
        if sample:
            # A seed per request, drawn outside the compiled program; inside,
            # draws are stateless, as XLA wants them.
            if seed is None:
                seed = tf.random.uniform([], 0, 2**31 - 1, dtype=tf.int32)
            seed = tf.cast(seed, tf.int32)

            def search(first, rows, encoded):
                # Each program's seed is the request's and its first row's:
                # rows of different programs draw apart, and repeat with the seed.
                part_seed = tf.random.stateless_uniform(
                    [], [seed, first], 0, 2**31 - 1, dtype=tf.int32
                )
                return fn(rows, encoded, seed=part_seed)

        else:
            search = lambda first, rows, encoded: fn(rows, encoded)  # noqa: E731
        source_ids = self.shapes.pad_length(source_ids, tf.shape(source_ids)[1])
        beams = 1 if sample else beam_size
        return self.shapes.run(
            search,
            [source_ids, self.encode_rows(source_ids)],
            [([beams, self.max_output_length], tf.int32), ([beams], tf.float32)],
        )

    @tf.autograph.experimental.do_not_convert
    def _search_ids(self, source_ids, encoded, beam_size, sample=False, seed=None, prefix=None):
        batch = tf.shape(source_ids)[0]
        lengths = _common.state_lengths(
            self.max_output_length, **CACHE_LENGTHS["compiled" if self.jit_compile else "plain"]
        )
        options = dict(
            max_length=self.max_output_length, rules=self.rules, prefix=prefix,
            grow_state=_common.grow_caches, grow_lengths=lengths,
        )  # fmt: skip
        state = self.model.init_decoding_state(source_ids, lengths[0], encoded=encoded)
        # The encoder's keys, values and mask never change during a search:
        # the step closes over them, untiled (the beams of a source row
        # share them), instead of the search carrying and reordering them.
        constant = {key: state.pop(key) for key in ("cross_attention_cache", "encoder_mask")}

        def step(ids, index, loop_state):
            logits, new_state = self.model.decode_step(
                ids, index, {**constant, **loop_state}, compiled=self.jit_compile
            )
            return logits, {"self_attention_cache": new_state["self_attention_cache"]}

        start = tf.fill([batch], START_ID)
        if sample:
            return sample_search(
                step,
                start,
                state,
                temperature=self.generation.sampling_temperature,
                top_k=self.generation.sampling_topk,
                top_p=self.generation.sampling_topp,
                seed=seed,
                **options,
            )
        if beam_size == 1:
            return greedy_search(step, start, state, **options)
        return beam_search(step, start, state, beam_size=beam_size, **options)

    def _check_beam_size(self, beam_size):
        # More beams than target tokens is no wider search (the first step
        # has a hypothesis a token), only memory: 100,000 beams of a tiny
        # model took 24 GB and failed.
        check_positive_int("beam_size", beam_size)
        vocab = getattr(self.model, "target_vocab_size", None)
        if vocab is not None and beam_size > vocab:
            raise ValueError(
                f"`beam_size` must be at most the target vocabulary's size, {vocab}. "
                f"Received: beam_size={beam_size}"
            )

    def _detokenize(self, sequences):
        """`[batch, beams, length]` ids -> `[batch, beams]` strings."""
        batch, beams = tf.shape(sequences)[0], tf.shape(sequences)[1]
        flat = tf.reshape(sequences, [batch * beams, -1])
        text = self.target_tokenizer.detokenize(flat)
        return tf.reshape(text, [batch, beams])

    def translate_nbest(self, text, beam_size=None, target_prefix=None):
        """Returns `{"translations": [batch, beams], "scores": [batch, beams],
        "ids": [batch, beams, length]}`, best first.

        Args:
            text: `[batch]` source strings.
            beam_size: beams of this search (default: the config's).
            target_prefix: `[batch]` strings each translation must begin
                with (CTranslate2's `target_prefix`, for interactive
                translation): tokenized by the target tokenizer, forced
                through the decoder, then searched on freely; the
                translations hold the prefix, and the scores count its
                tokens. An empty prefix is a plain translation. None: no
                prefix (a graph without the forcing).
        """
        beam_size = self.beam_size if beam_size is None else _common.as_int(beam_size)
        self._check_beam_size(beam_size)
        text = tf.reshape(tf.convert_to_tensor(text, tf.string), [-1])
        prefix = None
        if target_prefix is not None:
            prefix = self.encode_prefix(target_prefix)
            rows_match = tf.debugging.assert_equal(
                tf.size(text),
                tf.shape(prefix.ids)[0],
                message="`text` and `target_prefix` must have the same number of rows",
            )
            with tf.control_dependencies([rows_match]):
                text = tf.identity(text)
        source_ids = self.encode_text(text)
        searched = self._search(source_ids, beam_size, prefix=prefix)
        sequences, scores = _empty_for_empty(text, *searched)
        translations = self._detokenize(sequences)
        return {"translations": translations, "scores": scores, "ids": sequences}

    def translate(self, text, beam_size=None, target_prefix=None):
        """Returns `{"translation": [batch], "score": [batch]}` (the best
        beam); `target_prefix` as in `translate_nbest`."""
        best = self.translate_nbest(text, beam_size, target_prefix)
        return {"translation": best["translations"][:, 0], "score": best["scores"][:, 0]}

    def attention(self, text):
        """Cross-attention of the best beam over the source, for plots.

        Returns:
            `{"source_tokens": [batch, s], "target_tokens": [batch, t],
            "weights": [batch, t, s]}`: subword pieces (padding is
            `"<pad>"`) and the last decoder block's head-averaged weights.
        """
        text = tf.reshape(tf.convert_to_tensor(text, tf.string), [-1])
        source_ids = self.encode_text(text)
        sequences, _ = self._search(source_ids, self.beam_size)
        best = sequences[:, 0]  # [batch, length]
        start = tf.fill([tf.shape(best)[0], 1], START_ID)
        decoder_inputs = tf.concat([start, best[:, :-1]], axis=1)
        weights = self.model.cross_attention(source_ids, decoder_inputs)
        return {
            "source_tokens": self.source_tokenizer.id_to_piece(source_ids),
            "target_tokens": self.target_tokenizer.id_to_piece(best),
            "weights": weights,
        }

    def translate_greedy(self, text):
        """Greedy translation: `{"translation": [batch], "score": [batch]}`."""
        return self.translate(text, beam_size=1)

    def translate_sample(self, text, seed=None):
        """A translation drawn from the model, token by token, with the
        sampling options of the constructor (`sampling_topk=1` is greedy).

        Args:
            text: `[batch]` strings.
            seed: an int for samples that repeat; None samples anew.

        Returns:
            `{"translation": [batch], "score": [batch]}`, the score being the
            sample's length-normalized log-probability under the model.
        """
        text = tf.reshape(tf.convert_to_tensor(text, tf.string), [-1])
        sequences, scores = self._search(self.encode_text(text), 1, sample=True, seed=seed)
        sequences, scores = _empty_for_empty(text, sequences, scores)
        return {"translation": self._detokenize(sequences)[:, 0], "score": scores[:, 0]}

    def score(self, text, translation):
        """How likely the model finds each given translation of each text.

        The text and the translation are tokenized and closed with the end
        token; one teacher-forced pass gives every token's log-probability
        (as fairseq-score and OpenNMT-tf's `score`). Each is cut only where
        the model's position table ends (`max_length` tokens, end token
        included), as `transformers` scores every label and CTranslate2's
        `score_batch` cuts at its input limit: never at `max_output_length`
        or `max_input_length`, which bound what a search generates and
        reads. `length` shows what a cut left.
        Text is scored as the tokenizer segments it: a sampled translation
        whose pieces were not that segmentation (rare pieces drawn one by
        one) scores as the segmentation of its text.

        Args:
            text: `[batch]` source strings.
            translation: `[batch]` target strings, row by row with `text`.

        Returns:
            `{"log_prob": [batch] float32, "length": [batch] int32}`: the sum
            of the tokens' log-probabilities, end token included, and the
            number of tokens summed. For the greedy translation of a
            text this is greedy search's own log-probability (its `score`
            before the length penalty); an empty text's empty translation
            is the translator's rule, scored 0 by `translate`, and here
            the model's log-probability of the end token alone.
        """
        text = tf.reshape(tf.convert_to_tensor(text, tf.string), [-1])
        translation = tf.reshape(tf.convert_to_tensor(translation, tf.string), [-1])
        rows_match = tf.debugging.assert_equal(
            tf.size(text),
            tf.size(translation),
            message="`text` and `translation` must have the same number of rows",
        )
        with tf.control_dependencies([rows_match]):
            source_ids = self.encode_text(text, self.max_length)
        ids = self.target_tokenizer.tokenize(translation)[:, : self.max_length - 1]
        rows = ids.nrows()
        labels = tf.concat([ids, tf.fill([rows, 1], END_ID)], axis=1)
        inputs = tf.concat([tf.fill([rows, 1], START_ID), ids], axis=1).to_tensor(0)
        lengths = tf.cast(labels.row_lengths(), tf.int32)
        labels = labels.to_tensor(0)
        if not self.jit_compile:
            log_prob = self._log_prob(source_ids, inputs, labels, lengths)
            return {"log_prob": log_prob, "length": lengths}
        if "score" not in self._compiled:
            self._compiled["score"] = tf.function(self._log_prob, jit_compile=True)
        # Source and translation share one compiled length: the programs
        # stay one per (batch, length). Rows longer than the longest program
        # (up to the position table) run uncompiled rather than cut.
        needed = tf.maximum(tf.shape(source_ids)[1], tf.shape(labels)[1])
        score = self._compiled["score"]

        def compiled():
            length = self.shapes.bucket(needed)
            padded = [
                tf.pad(t, [[0, 0], [0, length - tf.shape(t)[1]]])
                for t in (source_ids, inputs, labels)
            ]
            (log_prob,) = self.shapes.run(
                lambda first, *rows: score(*rows), [*padded, lengths], [([], tf.float32)]
            )
            return log_prob

        log_prob = tf.cond(
            needed <= self.shapes.lengths[-1],
            compiled,
            lambda: self._log_prob(source_ids, inputs, labels, lengths),
        )
        return {"log_prob": log_prob, "length": lengths}

    def _log_prob(self, source_ids, inputs, labels, lengths):
        """Teacher-forced log-probability of the first `lengths [batch]`
        tokens of `labels [batch, length]`, given the decoder `inputs` of
        the same shape."""
        logits = self.model((source_ids, inputs), training=False)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        token_log_probs = tf.gather(log_probs, labels, batch_dims=2)  # [batch, length]
        real = tf.sequence_mask(lengths, tf.shape(labels)[1])
        return tf.reduce_sum(tf.where(real, token_log_probs, 0.0), axis=-1)

    def translate_batches(self, sentences, batch_size=64, beam_size=None):
        """Translates a Python list of str in batches; returns a list of str."""
        check_positive_int("batch_size", batch_size)
        # The searches are explicit while loops: nothing for AutoGraph to do.
        fn = tf.function(
            lambda text: self.translate(text, beam_size)["translation"], autograph=False
        )
        outputs = []
        # Sorting by length keeps batches homogeneous and fast.
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        for begin in range(0, len(order), batch_size):
            chunk = [sentences[i] for i in order[begin : begin + batch_size]]
            outputs += [t.decode("utf-8") for t in fn(tf.constant(chunk)).numpy()]
        result = [None] * len(sentences)
        for position, index in enumerate(order):
            result[index] = outputs[position]
        return result


def _empty_for_empty(text, sequences, scores):
    """Empty input gives empty output: the rows of `text` that are empty or
    blank get hypotheses of no tokens (all padding) scored 0, as
    CTranslate2's empty result, whatever the search made of their lone end
    token. `sequences [batch, beams, length]`, `scores [batch, beams]`."""
    empty = tf.equal(tf.strings.length(tf.strings.strip(text)), 0)
    sequences = tf.where(empty[:, None, None], tf.zeros_like(sequences), sequences)
    return sequences, tf.where(empty[:, None], tf.zeros_like(scores), scores)
