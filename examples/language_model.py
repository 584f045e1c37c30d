"""A decoder-only language model from the library's layers, sampled with its searches.

`PositionalEmbedding -> Decoder x 2 -> Dense`, the decoder built without an
encoder sequence: no cross-attention, no weights for it (as keras-hub's
`TransformerDecoder`). Trained with `model.fit` on the English side of the
synthetic task (next-token prediction, padding masked), then continued
from a prompt token by token over the decoder's self-attention cache with
the library's `greedy_search` and `sample_search` (top-k, temperature),
the searches the translator runs. A minute or two; `KT_EXAMPLE_QUICK=1`
trains for seconds.
"""

import os

import keras
import numpy as np
import tensorflow as tf

import keras_transformer  # noqa: F401  (registers the layers for loading)
from keras_transformer.data import SubwordTokenizer, generate_pairs
from keras_transformer.data.tokenizer import END_ID, PAD_ID, START_ID
from keras_transformer.decoding import Prefix, Rules, greedy_search, sample_search
from keras_transformer.layers import Decoder, PositionalEmbedding
from keras_transformer.losses import MaskedSparseCategoricalCrossentropy

QUICK = os.environ.get("KT_EXAMPLE_QUICK") == "1"
D_MODEL, HEADS, DFF, LAYERS, MAX_LENGTH = 64, 4, 128, 2, 48

sentences = [english for english, _ in generate_pairs(2_000 if QUICK else 20_000, max_words=12)]
tokenizer = SubwordTokenizer.train(sentences, 600)
ids = tokenizer.tokenize(sentences)  # ragged [n, (length)]
rows = [[START_ID, *row[: MAX_LENGTH - 2], END_ID] for row in ids.to_list()]
sequences = np.zeros((len(rows), MAX_LENGTH), "int32")
for i, row in enumerate(rows):
    sequences[i, : len(row)] = row

embedding = PositionalEmbedding(tokenizer.vocab_size, D_MODEL, max_length=MAX_LENGTH)
decoder = Decoder(LAYERS, D_MODEL, HEADS, DFF, dropout=0.1)  # decoder-only: no encoder
head = keras.layers.Dense(tokenizer.vocab_size)
tokens = keras.Input((None,), dtype="int32")
model = keras.Model(tokens, head(decoder(embedding(tokens))))
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=MaskedSparseCategoricalCrossentropy())
model.fit(sequences[:, :-1], sequences[:, 1:], batch_size=64, epochs=1 if QUICK else 3,
          steps_per_epoch=30 if QUICK else None, verbose=2)  # fmt: skip
assert all(block.cross_attention is None for block in decoder.blocks)
print(f"a decoder-only model of {model.count_params():,} parameters, no cross-attention")


def step(token, index, cache):
    """One position: its logits from the token and the cache, the cache written."""
    x = embedding(token[:, None], start_index=index)
    x, cache = decoder(x, self_attention_cache=cache, cache_index=index)
    return head(x)[:, 0], cache


prompt = "A man"
prompt_ids = tokenizer.tokenize([prompt]).to_tensor()[0]  # no end token: it continues
batch = 3
# The prompt is forced first, as a translation's target prefix, then the model writes on.
prefix = Prefix(tf.tile(prompt_ids[None], [batch, 1]), tf.fill([batch], tf.size(prompt_ids)))
rules = Rules(end_id=END_ID, banned_ids=(PAD_ID, START_ID)).checked()
common = dict(max_length=MAX_LENGTH - 1, rules=rules, prefix=prefix)
start = tf.fill([batch], START_ID)
cache = decoder.init_self_attention_cache(batch, MAX_LENGTH)
greedy, _ = greedy_search(step, start, cache, **common)
sampled, scores = sample_search(step, start, cache, temperature=0.8, top_k=20, seed=1, **common)
print("greedy:", tokenizer.detokenize(greedy[:1, 0]).numpy()[0].decode())
for text, score in zip(tokenizer.detokenize(sampled[:, 0]).numpy(), scores[:, 0].numpy()):
    print(f"sampled ({score:.2f}): {text.decode()}")
