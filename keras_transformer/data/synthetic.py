"""A synthetic English -> German-like translation task, generated from a seed.

The grammar is small but the translation is not word-for-word: German nouns
have gender (der/die/das) and the article and adjective endings agree with
gender, number and case (nominative subjects, accusative objects, dative
objects of `helfen`/`folgen`, indirect objects and prepositions); main
clauses are verb-second while subordinate clauses (`weil`, `dass`, `wenn`)
put the verb last after a comma; some verbs are irregular (`liest`, `isst`,
`nimmt`, `mag`, `weiß`), plurals are irregular (`Mann`/`Männer`), weak nouns
decline (`dem Jungen`), dative
plurals add `-n`, and `in dem`/`von dem`/`bei dem` contract to
`im`/`vom`/`beim`. Sentences run from 3 to 40 words.
"""

import random

# (english singular, english plural, german singular, german plural, gender)
NOUNS = [
    ("man", "men", "Mann", "Männer", "m"),
    ("woman", "women", "Frau", "Frauen", "f"),
    ("child", "children", "Kind", "Kinder", "n"),
    ("dog", "dogs", "Hund", "Hunde", "m"),
    ("cat", "cats", "Katze", "Katzen", "f"),
    ("teacher", "teachers", "Lehrer", "Lehrer", "m"),
    ("girl", "girls", "Mädchen", "Mädchen", "n"),
    ("boy", "boys", "Junge", "Jungen", "m"),
    ("doctor", "doctors", "Ärztin", "Ärztinnen", "f"),
    ("friend", "friends", "Freund", "Freunde", "m"),
    ("bird", "birds", "Vogel", "Vögel", "m"),
    ("student", "students", "Studentin", "Studentinnen", "f"),
]
THINGS = [
    ("house", "houses", "Haus", "Häuser", "n"),
    ("car", "cars", "Auto", "Autos", "n"),
    ("table", "tables", "Tisch", "Tische", "m"),
    ("book", "books", "Buch", "Bücher", "n"),
    ("apple", "apples", "Apfel", "Äpfel", "m"),
    ("letter", "letters", "Brief", "Briefe", "m"),
    ("flower", "flowers", "Blume", "Blumen", "f"),
    ("ball", "balls", "Ball", "Bälle", "m"),
    ("cup", "cups", "Tasse", "Tassen", "f"),
    ("bread", "breads", "Brot", "Brote", "n"),
    ("door", "doors", "Tür", "Türen", "f"),
    ("garden", "gardens", "Garten", "Gärten", "m"),
    ("city", "cities", "Stadt", "Städte", "f"),
    ("picture", "pictures", "Bild", "Bilder", "n"),
]
PLACES = [t for t in THINGS if t[0] in ("house", "car", "garden", "city")]
ADJECTIVES = [
    ("big", "groß"),
    ("small", "klein"),
    ("old", "alt"),
    ("young", "jung"),
    ("red", "rot"),
    ("green", "grün"),
    ("happy", "glücklich"),
    ("tired", "müd"),
    ("beautiful", "schön"),
    ("new", "neu"),
    ("fast", "schnell"),
    ("quiet", "leis"),
]
# (english 3sg, english plural, german 3sg, german 3pl)
TRANSITIVE = [
    ("sees", "see", "sieht", "sehen"),
    ("buys", "buy", "kauft", "kaufen"),
    ("reads", "read", "liest", "lesen"),
    ("eats", "eat", "isst", "essen"),
    ("finds", "find", "findet", "finden"),
    ("likes", "like", "mag", "mögen"),
    ("has", "have", "hat", "haben"),
    ("takes", "take", "nimmt", "nehmen"),
    ("carries", "carry", "trägt", "tragen"),
]
DATIVE_VERBS = [
    ("helps", "help", "hilft", "helfen"),
    ("follows", "follow", "folgt", "folgen"),
    ("answers", "answer", "antwortet", "antworten"),
]
GIVING = [("gives", "give", "gibt", "geben"), ("shows", "show", "zeigt", "zeigen")]
INTRANSITIVE = [
    ("sleeps", "sleep", "schläft", "schlafen"),
    ("runs", "run", "läuft", "laufen"),
    ("laughs", "laugh", "lacht", "lachen"),
    ("waits", "wait", "wartet", "warten"),
]
CLAUSE_VERBS = [
    ("knows", "know", "weiß", "wissen"),
    ("says", "say", "sagt", "sagen"),
    ("thinks", "think", "denkt", "denken"),
    ("believes", "believe", "glaubt", "glauben"),
]
CONJUNCTIONS = [("because", "weil"), ("when", "wenn")]
PREPOSITIONS = [("in", "in"), ("with", "mit"), ("from", "von"), ("near", "bei")]
# Weak masculine nouns take -n outside the nominative singular.
N_DECLENSION = {"Junge": "Jungen"}
CONTRACTIONS = {("in", "dem"): "im", ("von", "dem"): "vom", ("bei", "dem"): "beim"}

DEFINITE = {
    "nom": {"m": "der", "f": "die", "n": "das", "pl": "die"},
    "acc": {"m": "den", "f": "die", "n": "das", "pl": "die"},
    "dat": {"m": "dem", "f": "der", "n": "dem", "pl": "den"},
}
INDEFINITE = {
    "nom": {"m": "ein", "f": "eine", "n": "ein"},
    "acc": {"m": "einen", "f": "eine", "n": "ein"},
    "dat": {"m": "einem", "f": "einer", "n": "einem"},
}
WEAK = {
    "nom": {"m": "e", "f": "e", "n": "e", "pl": "en"},
    "acc": {"m": "en", "f": "e", "n": "e", "pl": "en"},
    "dat": {"m": "en", "f": "en", "n": "en", "pl": "en"},
}
MIXED = {
    "nom": {"m": "er", "f": "e", "n": "es"},
    "acc": {"m": "en", "f": "e", "n": "es"},
    "dat": {"m": "en", "f": "en", "n": "en"},
}
STRONG_PLURAL = {"nom": "e", "acc": "e", "dat": "en"}


class _NounPhrase:
    """A noun phrase, rendered in English once and in German per case."""

    def __init__(self, rng, pool, allow_pp=True, depth=0):
        self.noun = rng.choice(pool)
        self.plural = rng.random() < 0.3
        self.determiner = "a" if (not self.plural and rng.random() < 0.3) else "the"
        if self.plural and rng.random() < 0.3:
            self.determiner = None
        self.adjectives = rng.sample(ADJECTIVES, k=rng.choice([0, 0, 1, 1, 2]))
        self.pp = None
        if allow_pp and depth < 1 and rng.random() < 0.25:
            self.pp = (rng.choice(PREPOSITIONS), _NounPhrase(rng, PLACES, False, depth + 1))

    def english(self):
        words = [self.determiner] if self.determiner else []
        words += [a for a, _ in self.adjectives]
        words.append(self.noun[1] if self.plural else self.noun[0])
        if self.pp:
            (en_prep, _), np_ = self.pp
            words += [en_prep] + np_.english()
        return words

    def german(self, case, preposition=None):
        gender = "pl" if self.plural else self.noun[4]
        words = []
        if self.determiner == "the":
            article, endings = DEFINITE[case][gender], WEAK[case][gender]
        elif self.determiner == "a":
            article, endings = INDEFINITE[case][gender], MIXED[case][gender]
        else:
            article, endings = None, STRONG_PLURAL[case]
        if preposition is not None:
            contracted = CONTRACTIONS.get((preposition, article))
            if contracted:
                words.append(contracted)
                article = None
            else:
                words.append(preposition)
        if article:
            words.append(article)
        words += [stem + endings for _, stem in self.adjectives]
        noun = self.noun[3] if self.plural else self.noun[2]
        if not self.plural and case != "nom":
            noun = N_DECLENSION.get(noun, noun)
        if self.plural and case == "dat" and not noun.endswith(("n", "s")):
            noun += "n"
        words.append(noun)
        if self.pp:
            (_, de_prep), np_ = self.pp
            words += np_.german("dat", preposition=de_prep)
        return words


class _Clause:
    """Subject, verb and its objects; rendered verb-second or verb-final."""

    def __init__(self, rng, depth=0):
        self.subject = _NounPhrase(rng, NOUNS)
        kind = rng.choices(
            ["intransitive", "transitive", "dative", "giving", "clause"],
            weights=[2, 5, 2, 2, 2 if depth < 2 else 0],
        )[0]
        self.kind = kind
        self.verb = rng.choice(
            {
                "intransitive": INTRANSITIVE,
                "transitive": TRANSITIVE,
                "dative": DATIVE_VERBS,
                "giving": GIVING,
                "clause": CLAUSE_VERBS,
            }[kind]
        )
        self.object = None
        self.indirect = None
        self.complement = None
        if kind == "transitive":
            self.object = _NounPhrase(rng, THINGS + NOUNS)
        elif kind == "dative":
            self.object = _NounPhrase(rng, NOUNS)
        elif kind == "giving":
            self.object = _NounPhrase(rng, THINGS, allow_pp=False)
            self.indirect = _NounPhrase(rng, NOUNS, allow_pp=False)
        elif kind == "clause":
            self.complement = _Clause(rng, depth + 1)

    def english(self):
        verb = self.verb[1] if self.subject.plural else self.verb[0]
        words = self.subject.english() + [verb]
        if self.kind == "giving":
            words += self.object.english() + ["to"] + self.indirect.english()
        elif self.object is not None:
            words += self.object.english()
        elif self.complement is not None:
            words += ["that"] + self.complement.english()
        return words

    def german(self, verb_final=False):
        verb = self.verb[3] if self.subject.plural else self.verb[2]
        middle = []
        if self.kind == "giving":
            middle = self.indirect.german("dat") + self.object.german("acc")
        elif self.kind == "dative":
            middle = self.object.german("dat")
        elif self.object is not None:
            middle = self.object.german("acc")
        tail = []
        if self.complement is not None:
            tail = [",", "dass"] + self.complement.german(verb_final=True)
        subject = self.subject.german("nom")
        if verb_final:
            return subject + middle + [verb] + tail
        return subject + [verb] + middle + tail


def _capitalize(words):
    return [words[0][:1].upper() + words[0][1:]] + words[1:]


def _join(words):
    text = " ".join(words)
    return text.replace(" ,", ",").replace(" .", ".")


def generate_pair(rng):
    """One `(english, german)` sentence pair from a `random.Random`."""
    first = _Clause(rng)
    en, de = first.english(), first.german()
    while rng.random() < 0.45:
        if rng.random() < 0.5:
            conj_en, conj_de = rng.choice(CONJUNCTIONS)
            clause = _Clause(rng, depth=1)
            en += [conj_en] + clause.english()
            de += [",", conj_de] + clause.german(verb_final=True)
        else:
            clause = _Clause(rng, depth=1)
            en += ["and"] + clause.english()
            de += ["und"] + clause.german()
    return _join(_capitalize(en) + ["."]), _join(_capitalize(de) + ["."])


def generate_pairs(num_pairs, seed=0, min_words=3, max_words=40):
    """Generates `num_pairs` sentence pairs, deterministically from `seed`.

    Args:
        num_pairs: how many pairs.
        seed: the same seed always gives the same pairs.
        min_words: shortest English sentence, in words.
        max_words: longest English sentence, in words.

    Returns:
        A list of `(english, german)` strings.

    Example:

    >>> english, german = generate_pairs(1, seed=3)[0]
    >>> english
    'A tired fast dog follows a beautiful cat.'
    >>> german
    'Ein müder schneller Hund folgt einer schönen Katze.'
    """
    if num_pairs < 0:
        raise ValueError(f"`num_pairs` must be >= 0. Received: num_pairs={num_pairs}")
    rng = random.Random(seed)
    pairs = []
    while len(pairs) < num_pairs:
        en, de = generate_pair(rng)
        if min_words <= len(en.split()) <= max_words:
            pairs.append((en, de))
    return pairs


# The splits of the synthetic dataset: `(pairs, seed)`.
SPLITS = {"train": (60_000, 1), "validation": (1_000, 2), "test": (1_000, 3)}


def split_pairs(split):
    """The pairs of one split of the synthetic dataset (`--dataset
    synthetic`), as its tensorflow-datasets builder writes them: held-out
    splits never repeat a training sentence.

    Args:
        split: `"train"`, `"validation"` or `"test"`.

    Returns:
        A list of `(english, german)` strings.
    """
    if split not in SPLITS:
        raise ValueError(f"`split` must be one of {', '.join(SPLITS)}. Received: split={split!r}")
    size, seed = SPLITS[split]
    train_sources = set()
    if split != "train":
        train_sources = {en for en, _ in generate_pairs(*SPLITS["train"])}
    pairs = generate_pairs(size + len(train_sources) // 10, seed)
    return [(en, de) for en, de in pairs if en not in train_sources][:size]


def write_split(split, prefix):
    """Writes one split as parallel text files `PREFIX.en` and `PREFIX.de`,
    one sentence a line, for `evaluate --source PREFIX.en --reference
    PREFIX.de` (`python -m keras_transformer.data.synthetic test test`).

    Returns:
        The two paths.
    """
    paths = (f"{prefix}.en", f"{prefix}.de")
    pairs = split_pairs(split)
    for side, path in enumerate(paths):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(pair[side] + "\n" for pair in pairs)
    return paths


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m keras_transformer.data.synthetic",
        description="Writes a split of the synthetic dataset as PREFIX.en and PREFIX.de.",
    )
    parser.add_argument("split", choices=tuple(SPLITS))
    parser.add_argument("prefix", help="the files' path without .en and .de")
    args = parser.parse_args()
    print(*write_split(args.split, args.prefix))
