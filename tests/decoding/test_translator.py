import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data.tokenizer import END_ID, START_ID
from keras_transformer.decoding import Rules, Translator, _common, beam_search, greedy_search

SENTENCES = [
    "The dog sleeps.",
    "A tired man gives the book to the happy women because the cats run.",
    "The old teachers see a red ball in the garden.",
]
MAX_OUTPUT = 16


@pytest.fixture(scope="module")
def parts(trained_model):
    return trained_model


@pytest.fixture(scope="module")
def translator(parts):
    return Translator(*parts, beam_size=3, max_output_length=MAX_OUTPUT)


def _strings(tensor):
    return [t.decode("utf-8") for t in tensor.numpy().reshape(-1)]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_search_equals_the_plain_search_over_decode_step(parts, translator, beam_size):
    # The translator closes over the encoder state and splits the cache per
    # layer; the search straight over `decode_step` is the reference.
    model = parts[0]
    context = translator.encode_text(tf.constant(SENTENCES))
    state = model.init_decoding_state(context, MAX_OUTPUT)
    start = tf.fill([len(SENTENCES)], START_ID)
    if beam_size == 1:
        want, want_scores = greedy_search(
            model.decode_step, start, state, max_length=MAX_OUTPUT, rules=Rules(end_id=END_ID)
        )
    else:
        want, want_scores = beam_search(
            model.decode_step,
            start,
            state,
            beam_size=beam_size,
            max_length=MAX_OUTPUT,
            rules=Rules(end_id=END_ID),
        )
    got = translator.translate_nbest(tf.constant(SENTENCES), beam_size=beam_size)
    np.testing.assert_array_equal(got["ids"], want)
    np.testing.assert_allclose(got["scores"], want_scores, atol=1e-4)


def _never_ending(model):
    """A model of `model`'s config, random weights, whose translations never
    end: they run through every length of the growing caches. Nor does it
    pick the padding id, which a trained model never does: the next step's
    query would be fully masked and attend uniformly over the whole cache,
    unwritten positions included, so over a number of positions that
    depends on the cache's length."""
    import keras

    keras.utils.set_random_seed(3)
    fresh = type(model).from_config(model.get_config())
    fresh.build(((None, None), (None, None)))
    kernel, bias = fresh.output_projection.get_weights()
    bias[[END_ID, 0]] = -1e9
    fresh.output_projection.set_weights([kernel, bias])
    return fresh


@pytest.mark.parametrize("beam_size", [1, 3])
def test_caches_that_grow_give_the_search_over_whole_caches(parts, beam_size, monkeypatch):
    # 40 tokens: the translator's caches hold 32, then 40 positions (16,
    # 32, 40 compiled); the reference search's hold 40 from the first step.
    grown, grow_caches = [], _common.grow_caches

    def recorded(state, length):
        grown.append(length)
        return grow_caches(state, length)

    monkeypatch.setattr(_common, "grow_caches", recorded)
    model, source, target = parts
    model, max_output = _never_ending(model), 40
    translator = Translator(model, source, target, max_output_length=max_output)
    context = translator.encode_text(tf.constant(SENTENCES))
    state = model.init_decoding_state(context, max_output)
    start = tf.fill([len(SENTENCES)], START_ID)
    options = dict(max_length=max_output, rules=Rules(end_id=END_ID))
    if beam_size == 1:
        want, want_scores = greedy_search(model.decode_step, start, state, **options)
    else:
        want, want_scores = beam_search(
            model.decode_step, start, state, beam_size=beam_size, **options
        )
    got = translator.translate_nbest(tf.constant(SENTENCES), beam_size=beam_size)
    # Beam search's first step, on one beam a row, runs on the first length.
    assert grown == ([32] if beam_size > 1 else []) + [32, 40]
    assert np.all(got["ids"][..., -1] > 0)  # every position written
    np.testing.assert_array_equal(got["ids"], want)
    np.testing.assert_allclose(got["scores"], want_scores, atol=1e-4)


def test_best_of_nbest_is_the_translation(translator):
    text = tf.constant(SENTENCES)
    nbest = translator.translate_nbest(text)
    best = translator.translate(text)
    assert nbest["translations"].shape == (3, 3)
    assert _strings(best["translation"]) == _strings(nbest["translations"][:, 0])
    np.testing.assert_allclose(best["score"], nbest["scores"][:, 0])
    assert np.all(np.diff(nbest["scores"].numpy(), axis=1) <= 1e-6)
    assert np.all(best["score"].numpy() <= 0.0)


def test_padding_in_a_batch_changes_no_translation(translator):
    alone = [_strings(translator.translate(tf.constant([s]))["translation"])[0] for s in SENTENCES]
    together = _strings(translator.translate(tf.constant(SENTENCES + ["", "   "]))["translation"])
    assert together == alone + ["", ""]


def _nbest(translator, text):
    got = translator.translate_nbest(text)
    return got["translations"], got["scores"], got["ids"]


def _greedy(translator, text):
    got = translator.translate_greedy(text)
    return got["translation"][:, None], got["score"][:, None], None


def _sample(translator, text):
    got = translator.translate_sample(text, seed=3)
    return got["translation"][:, None], got["score"][:, None], None


# (hypotheses of a batch, whether a row's scores are those it has alone: a
# sample's draws depend on the batch)
@pytest.mark.parametrize("run, alone", [(_nbest, True), (_greedy, True), (_sample, False)])
def test_empty_inputs_give_empty_hypotheses_scored_zero(translator, run, alone):
    # As CTranslate2's empty result: no tokens, score 0, in every beam.
    strings, scores, ids = run(translator, tf.constant(["", SENTENCES[0], " \t ", SENTENCES[1]]))
    strings, scores = np.array(_strings(strings)).reshape(scores.shape), scores.numpy()
    assert (strings[[0, 2]] == "").all()
    assert (strings[[1, 3]] != "").all()
    np.testing.assert_array_equal(scores[[0, 2]], 0.0)
    assert (scores[[1, 3]] < 0.0).all()
    if alone:
        _, want, _ = run(translator, tf.constant(SENTENCES[:2]))
        np.testing.assert_allclose(scores[[1, 3]], want.numpy(), atol=1e-4)
    if ids is not None:
        assert not ids.numpy()[[0, 2]].any()


def test_long_inputs_are_truncated_keeping_the_end_token(parts):
    translator = Translator(*parts, max_input_length=10, max_output_length=MAX_OUTPUT)
    long_sentence = " ".join(SENTENCES * 3)
    context = translator.encode_text(tf.constant([long_sentence, "The dog sleeps."])).numpy()
    full = parts[1].tokenize(tf.constant([long_sentence])).to_tensor().numpy()[0]
    assert context.shape[1] == 10 and len(full) > 10
    np.testing.assert_array_equal(context[0], list(full[:9]) + [END_ID])
    # What is cut off cannot change the translation.
    prefix = parts[1].detokenize(tf.constant([full[:9]])).numpy()[0].decode("utf-8")
    assert _strings(translator.translate(tf.constant([long_sentence]))["translation"]) == _strings(
        translator.translate(tf.constant([prefix]))["translation"]
    )


def test_lengths_are_capped_by_the_model(parts):
    model = parts[0]
    translator = Translator(*parts, max_input_length=10**6, max_output_length=10**6)
    assert translator.max_input_length == model.max_length
    assert translator.max_output_length == model.max_length


def test_translate_batches_keeps_the_input_order(translator):
    sentences = SENTENCES[::-1] + ["", "A cat runs."]
    got = translator.translate_batches(sentences, batch_size=2)
    want = _strings(translator.translate(tf.constant(sentences))["translation"])
    assert got == want and got[3] == ""


def test_greedy_is_one_beam(translator):
    text = tf.constant(SENTENCES)
    assert _strings(translator.translate_greedy(text)["translation"]) == _strings(
        translator.translate(text, beam_size=1)["translation"]
    )


@pytest.mark.parametrize("beam_size", [0, -2])
def test_bad_beam_size(parts, beam_size):
    with pytest.raises(ValueError, match="beam_size"):
        Translator(*parts, beam_size=beam_size)


@pytest.mark.parametrize("beam_size", [0, -1])
def test_bad_beam_size_per_call(translator, beam_size):
    with pytest.raises(ValueError, match="beam_size"):
        translator.translate(tf.constant(["The dog sleeps."]), beam_size=beam_size)


@pytest.mark.parametrize("per_call", [False, True])
def test_more_beams_than_target_tokens_are_refused(parts, translator, per_call):
    vocab = parts[0].target_vocab_size
    match = f"at most the target vocabulary's size, {vocab}. Received: beam_size={vocab + 1}$"
    with pytest.raises(ValueError, match=match):
        if per_call:
            translator.translate(tf.constant(["The dog sleeps."]), beam_size=vocab + 1)
        else:
            Translator(*parts, beam_size=vocab + 1)
    Translator(*parts, beam_size=vocab)  # as many as the tokens: allowed


def test_sample_with_top_k_one_is_the_greedy_translation(parts):
    translator = Translator(*parts, max_output_length=MAX_OUTPUT, sampling_topk=1)
    greedy = translator.translate_greedy(tf.constant(SENTENCES + [""]))
    sampled = translator.translate_sample(tf.constant(SENTENCES + [""]))
    assert _strings(sampled["translation"]) == _strings(greedy["translation"])
    np.testing.assert_array_equal(sampled["score"].numpy(), greedy["score"].numpy())


def test_samples_vary_and_a_seed_repeats_them(parts):
    translator = Translator(*parts, max_output_length=MAX_OUTPUT, sampling_temperature=2.0)
    text = tf.constant(SENTENCES * 4)
    draws = [_strings(translator.translate_sample(text)["translation"]) for _ in range(2)]
    assert draws[0] != draws[1]
    seeded = [_strings(translator.translate_sample(text, seed=5)["translation"]) for _ in range(2)]
    assert seeded[0] == seeded[1]


def test_score_of_the_greedy_translation_is_greedy_search_log_probability(parts):
    translator = Translator(*parts, alpha=0.6, max_output_length=MAX_OUTPUT)
    text = tf.constant(SENTENCES)
    greedy = translator.translate_greedy(text)
    scored = translator.score(text, greedy["translation"])
    lengths = scored["length"].numpy()
    # greedy's score is its log-probability over the GNMT length penalty.
    penalty = ((5.0 + lengths) / 6.0) ** 0.6
    ended = lengths < MAX_OUTPUT  # a cut translation is closed by the end token here
    assert ended.any()
    np.testing.assert_allclose(
        scored["log_prob"].numpy()[ended], (greedy["score"].numpy() * penalty)[ended], atol=1e-4
    )


def test_score_equals_the_sum_over_incremental_decode_steps(parts):
    # Any translation, not the model's own: the reference decodes it one
    # token at a time through `decode_step` and sums the log-probabilities.
    model, _, target_tokenizer = parts
    translator = Translator(*parts, max_output_length=MAX_OUTPUT)
    translations = ["Der Hund schläft.", "Eine Frau liest das Buch.", ""]
    scored = translator.score(tf.constant(SENTENCES), tf.constant(translations))
    context = translator.encode_text(tf.constant(SENTENCES))
    for row, translation in enumerate(translations):
        ids = list(target_tokenizer.tokenize(tf.constant([translation])).numpy()[0]) + [END_ID]
        state = model.init_decoding_state(context[row : row + 1], MAX_OUTPUT)
        previous, total = START_ID, 0.0
        for index, token in enumerate(ids):
            logits, state = model.decode_step(tf.constant([previous]), index, state)
            total += float(tf.nn.log_softmax(logits)[0, token])
            previous = token
        assert scored["length"].numpy()[row] == len(ids)
        assert scored["log_prob"].numpy()[row] == pytest.approx(total, abs=1e-3)


def test_score_needs_one_translation_per_text(translator):
    with pytest.raises(tf.errors.InvalidArgumentError, match="same number of rows"):
        translator.score(tf.constant(["a", "b"]), tf.constant(["x"]))


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(sampling_temperature=-1.0), "`sampling_temperature`"),
        (dict(sampling_topk=-2), "`sampling_topk`"),
        (dict(sampling_topp=2.0), "`sampling_topp`"),
        (dict(sampling_temperature=float("inf")), "`sampling_temperature` must be a finite"),
        (dict(beams=2), "Unknown generation setting.*beams"),
        (dict(generation={"beam_size": 2}), "must be a GenerationConfig"),
    ],
)
def test_bad_sampling_options(parts, options, message):
    with pytest.raises(ValueError, match=message):
        Translator(*parts, **options)


# The compiled translator: the same step and searches as the plain one, in
# the fixed shapes of its ShapeRunner, so the same tokens and scores.
SOURCES = [
    "The dog sleeps.",
    "A tired man gives the book to the happy women because the cats run.",
    "The cat runs.",
    "The old teachers see a red ball in the garden.",
    "A woman reads.",
]


def _random_model(model, seed, **overrides):
    """A model of `model`'s vocabularies with random weights (translations
    that run to the longest length, through every cache length)."""
    import keras

    keras.utils.set_random_seed(seed)
    config = {**model.get_config(), "dropout": 0.0, **overrides}
    fresh = type(model).from_config(config)
    fresh.build(((None, None), (None, None)))
    return fresh


@pytest.mark.parametrize(
    "overrides, max_output, split_batches",
    # The split changes how rows run, not what a step does: the grown
    # caches' case (its XLA programs the slowest to compile) runs it once.
    [(None, 12, True), (None, 12, False), ({"norm_first": True}, 40, True)],
    ids=["trained, 12 tokens", "trained, 12 tokens, one program a chunk",
         "random pre-norm, 40 tokens (caches grown)"],
)  # fmt: skip
def test_the_compiled_translator_equals_the_plain_one(parts, overrides, max_output,
                                                      split_batches):  # fmt: skip
    # Batch sizes (1, 2) and lengths (8, ...): 3 rows run as chunks of 2
    # and 1 (a chunk of one row, as a request of one), 5 as 2, 2 and 1,
    # split in halves or not; short and long sources take different
    # lengths; no rows run nothing.
    model, source, target = parts
    if overrides is not None:
        model = _random_model(model, 2, **overrides)
    options = dict(max_output_length=max_output, beam_size=3, max_input_length=24)
    plain = Translator(model, source, target, **options)
    compiled = Translator(model, source, target, jit_compile=True, batch_sizes=(2, 1),
                          lengths=(8,), split_batches=split_batches, **options)  # fmt: skip
    assert compiled.lengths == [8, max(24, max_output)]
    assert compiled.program_batch_sizes == ([1] if split_batches else [1, 2])
    for rows in (SOURCES[:3], SOURCES, []):
        text = tf.constant(rows, tf.string)
        for beams in (3, 1):
            want = plain.translate_nbest(text, beam_size=beams)
            got = compiled.translate_nbest(text, beam_size=beams)
            np.testing.assert_array_equal(got["ids"], want["ids"])
            np.testing.assert_array_equal(got["translations"], want["translations"])
            np.testing.assert_allclose(got["scores"], want["scores"], atol=1e-4)
        translations = plain.translate(text)["translation"]
        want_scores = plain.score(text, translations)["log_prob"]
        got_scores = compiled.score(text, translations)["log_prob"]
        np.testing.assert_allclose(got_scores, want_scores, atol=1e-4)
        # XLA draws with its own generator: a seed repeats the compiled draws.
        first = compiled.translate_sample(text, seed=5)["translation"]
        np.testing.assert_array_equal(compiled.translate_sample(text, seed=5)["translation"], first)


def test_compiled_sampling_of_the_top_token_is_greedy_search(parts):
    translator = Translator(*parts, jit_compile=True, batch_sizes=(2,), max_output_length=12,
                            sampling_topk=1)  # fmt: skip
    text = tf.constant(SOURCES[:3])
    want = translator.translate_greedy(text)
    got = translator.translate_sample(text)
    np.testing.assert_array_equal(got["translation"], want["translation"])
    np.testing.assert_allclose(got["score"], want["score"], atol=1e-5)


def test_compiled_sampling_draws_apart_in_every_program(parts):
    # Four copies of one source in four programs of one row (chunks of 2,
    # split in halves): with one seed for all, the programs would draw
    # alike; each draws with the request's seed and its first row.
    model = _random_model(parts[0], 5)
    translator = Translator(model, *parts[1:], jit_compile=True, batch_sizes=(2,),
                            max_output_length=8)  # fmt: skip
    text = tf.constant(SOURCES[:1] * 4)
    first = translator.translate_sample(text, seed=5)["translation"]
    np.testing.assert_array_equal(translator.translate_sample(text, seed=5)["translation"], first)
    assert len(set(first.numpy().tolist())) == 4


def test_the_compiled_shapes_are_validated_and_listed(parts):
    with pytest.raises(ValueError, match="batch_sizes"):
        Translator(*parts, jit_compile=True, batch_sizes=(0, 4))
    translator = Translator(*parts, jit_compile=True, max_input_length=40, max_output_length=20)
    assert translator.lengths == [16, 24, 32, 40]
    # Chunks of 8 and 32 rows run as two programs of 4 and 16 at once.
    assert translator.program_batch_sizes == [1, 4, 16]
    assert translator.compiled_shapes[0] == (1, 16) and len(translator.compiled_shapes) == 12
    assert len(translator.compiled_searches) == 5
    # One beam is greedy search: the two signatures share one program.
    greedy_only = Translator(*parts, beam_size=1, jit_compile=True)
    assert greedy_only.compiled_searches == [
        "greedy search", "sampling", "scoring pass", "prefix search",
    ]  # fmt: skip


def test_the_translator_leaves_the_model_as_it_was(parts):
    model = _random_model(parts[0], 6)
    weights = [w.copy() for w in model.get_weights()]
    config = model.get_config()
    model((np.array([[5, 6, END_ID]]), np.array([[START_ID, 7]])))  # Keras' first-call marks

    # Every attribute of every layer still holds the object it held.
    def attributes(layer):
        return {
            name: value if isinstance(value, (str, int, float, type(None))) else id(value)
            for name, value in vars(layer).items()
        }

    before = {id(layer): attributes(layer) for layer in model._flatten_layers()}
    for jit_compile in (False, True):
        Translator(model, *parts[1:], jit_compile=jit_compile, max_output_length=8).translate(
            tf.constant(SOURCES[:2])
        )
    assert model.get_config() == config
    for layer in model._flatten_layers():
        assert attributes(layer) == before[id(layer)], layer.name
    for before, after in zip(weights, model.get_weights()):
        np.testing.assert_array_equal(before, after)


MIXED_LENGTHS = [
    "The dog sleeps.",
    "A tired man gives the book to the happy women because the cats run.",
    "",
    "The old teachers see a red ball in the garden.",
    "Cats run.",
    "The happy women see the tired man and the old dog in the red garden.",
]


@pytest.mark.parametrize("rows", [0, 1, 3, 6])
def test_rows_encoded_in_groups_of_similar_length_equal_the_whole_batch(translator, rows):
    # More and fewer rows than groups, an empty line, lengths out of order.
    source_ids = translator.encode_text(tf.constant(MIXED_LENGTHS[:rows], tf.string))
    got = translator.encode_rows(source_ids).numpy()
    want = translator.model.encode(source_ids, training=False).numpy()
    assert got.shape == want.shape
    real = source_ids.numpy() != 0
    # Past a row's length the output is padding, which the decoder masks.
    np.testing.assert_allclose(got[real], want[real], atol=1e-5)


# The controls: a target prefix, suppressed phrases, no unknown token.


def _uncached_greedy(model, source_ids, prefix, max_length, banned=(0,)):
    """Greedy decoding by whole passes of the model, no cache, no search
    code: the prefix's tokens first, then the argmax of the allowed ones.
    Returns the ids and the score of the tokens after the prefix (GNMT's
    penalty, alpha 0.6, over their count)."""
    tokens, total = [START_ID], 0.0
    for i in range(max_length):
        logits = model((source_ids, tf.constant([tokens])), training=False)[0, -1].numpy()
        log_probs = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
        log_probs[list(banned)] = -np.inf
        token = prefix[i] if i < len(prefix) else int(np.argmax(log_probs))
        if i >= len(prefix):
            total += log_probs[token]
        tokens.append(token)
        if token == END_ID:
            break
    chosen = len(tokens) - 1 - len(prefix)
    score = total / ((5 + chosen) / 6) ** 0.6
    return tokens[1:] + [0] * (max_length + 1 - len(tokens)), score


@pytest.mark.parametrize("compiled", [False, True], ids=["plain", "compiled"])
def test_a_target_prefix_is_forced_then_searched_on(parts, compiled):
    model, source, target = parts
    shapes = {"batch_sizes": (4,)} if compiled else {}
    translator = Translator(model, source, target, beam_size=1, max_output_length=MAX_OUTPUT,
                            jit_compile=compiled, **shapes)  # fmt: skip
    plain = translator.translate_nbest(tf.constant(SENTENCES))
    # Each row its prefix: the start of another row's translation, nothing,
    # or a word the plain translation does not begin with.
    prefixes = [_strings(plain["translations"][1:2])[0].split(" ")[0], "", "Ein Hund"]
    got = translator.translate_nbest(tf.constant(SENTENCES), target_prefix=tf.constant(prefixes))
    for row, (sentence, prefix) in enumerate(zip(SENTENCES, prefixes)):
        prefix_ids = target.tokenize(tf.constant([prefix]))[0].numpy().tolist()
        source_ids = translator.encode_text(tf.constant([sentence]))
        want, score = _uncached_greedy(model, source_ids, prefix_ids, MAX_OUTPUT)
        assert got["ids"][row, 0].numpy().tolist() == want
        assert got["scores"][row, 0].numpy() == pytest.approx(score, abs=1e-4)
        assert _strings(got["translations"][row])[0].startswith(prefix)
    # An empty prefix is a plain translation.
    np.testing.assert_array_equal(got["ids"][1], plain["ids"][1])
    np.testing.assert_allclose(got["scores"][1], plain["scores"][1], atol=1e-5)


def test_the_prefix_search_of_beams_keeps_the_prefix_in_every_hypothesis(translator):
    prefix = ["Der Hund"] * len(SENTENCES)
    nbest = translator.translate_nbest(tf.constant(SENTENCES), target_prefix=tf.constant(prefix))
    for row in _strings(nbest["translations"]):
        assert row.startswith("Der Hund")
    # The prefix is given: a hypothesis scores the tokens after it, as
    # `score` scores the whole translation less the prefix's own tokens.
    whole = translator.score(tf.constant(SENTENCES), nbest["translations"][:, 0])
    given = _prefix_log_prob(translator, SENTENCES, prefix)
    prefix_tokens = len(translator.target_tokenizer.tokenize(tf.constant(prefix[:1]))[0])
    chosen = whole["length"].numpy().astype("float32") - prefix_tokens
    want = (whole["log_prob"].numpy() - given) / ((5.0 + chosen) / 6.0) ** 0.6
    np.testing.assert_allclose(nbest["scores"][:, 0], want, atol=1e-3)


def _prefix_log_prob(translator, sentences, prefixes):
    """The log-probability of each prefix's tokens alone, no end token."""
    total = []
    for sentence, prefix in zip(sentences, prefixes):
        ids = translator.target_tokenizer.tokenize(tf.constant([prefix]))[0].numpy().tolist()
        source = translator.encode_text(tf.constant([sentence]))
        inputs = tf.constant([[START_ID] + ids])
        logits = translator.model((source, inputs), training=False)[0].numpy()
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        total.append(sum(float(log_probs[i, t]) for i, t in enumerate(ids)))
    return np.array(total, np.float32)


@pytest.mark.parametrize(
    "prefix, error",
    [
        ("Hund " * 40, "`target_prefix` is longer than max_output_length \\(16 tokens\\)"),
        (b"Der \xff", "`target_prefix` is not valid UTF-8"),
    ],
)
def test_a_bad_prefix_is_refused_in_one_line(translator, prefix, error):
    with pytest.raises(tf.errors.InvalidArgumentError, match=error):
        translator.translate(tf.constant(["The dog sleeps."]), target_prefix=tf.constant([prefix]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="same number of rows"):
        translator.translate(tf.constant(SENTENCES), target_prefix=tf.constant(["Der"]))


@pytest.mark.parametrize("compiled", [False, True], ids=["plain", "compiled"])
@pytest.mark.parametrize("beam_size", [1, 3])
def test_suppressed_phrases_never_appear(parts, translator, compiled, beam_size):
    model, source, target = parts
    plain = translator.translate_nbest(tf.constant(SENTENCES), beam_size=beam_size)
    # The phrases the plain translations hold: their first two words, and
    # one word of a single piece.
    words = _strings(plain["translations"][:, 0])
    phrases = sorted({" ".join(w.split(" ")[:2]) for w in words if len(w.split(" ")) > 1})
    single = next(p for p in target.pieces()[4:] if p.startswith("▁") and len(p) > 2)[1:]
    config = translator.generation.merged(suppress_sequences=[*phrases, single])
    constrained = Translator(model, source, target, config, jit_compile=compiled,
                             batch_sizes=(4,) if compiled else None)  # fmt: skip
    got = constrained.translate_nbest(tf.constant(SENTENCES), beam_size=beam_size)
    banned = [target.tokenize(tf.constant([p]))[0].numpy().tolist() for p in phrases]
    single_ids = target.tokenize(tf.constant([single]))[0].numpy().tolist()
    assert len(single_ids) == 1 and single_ids[0] in constrained.rules.banned_ids
    for hypothesis in got["ids"].numpy().reshape(-1, MAX_OUTPUT).tolist():
        for sequence in banned:
            assert not any(hypothesis[i : i + len(sequence)] == sequence
                           for i in range(len(hypothesis)))  # fmt: skip
        assert single_ids[0] not in hypothesis
    assert got["ids"].numpy().tolist() != plain["ids"].numpy().tolist()


def test_disable_unk_never_generates_the_unknown_token(parts):
    from keras_transformer.data.tokenizer import UNK_ID

    model = _random_model(parts[0], 7)
    kernel, bias = model.output_projection.get_weights()
    bias[UNK_ID] = 30.0  # the unknown token would win every step
    model.output_projection.set_weights([kernel, bias])
    for beam_size in (1, 3):
        free = Translator(model, *parts[1:], beam_size=beam_size, max_output_length=8)
        assert UNK_ID in free.translate_nbest(tf.constant(SENTENCES))["ids"].numpy()
        kept = Translator(model, *parts[1:], beam_size=beam_size, max_output_length=8,
                          disable_unk=True)  # fmt: skip
        ids = kept.translate_nbest(tf.constant(SENTENCES))["ids"].numpy()
        assert UNK_ID not in ids and ids.any()
        sampled = kept.translate_sample(tf.constant(SENTENCES * 8), seed=1)["translation"]
        assert "⁇" not in " ".join(_strings(sampled))


def test_a_phrase_of_no_token_is_refused(parts):
    # A zero-width space is normalized away: nothing is left to ban.
    with pytest.raises(ValueError, match=r"`suppress_sequences`: '\\u200b' tokenizes to no"):
        Translator(*parts, suppress_sequences=["\u200b"])
