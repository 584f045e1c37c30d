"""The token ids the library's own tokenizers reserve: 0 padding, 1 unknown,
2 start, 3 end.

TensorFlow-free, so that code that decodes without TensorFlow (under JAX,
say) names them as the tokenizers (`data.tokenizer`) do.
"""

PAD_ID, UNK_ID, START_ID, END_ID = 0, 1, 2, 3
