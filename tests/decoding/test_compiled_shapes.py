import pytest

from keras_transformer.decoding.compiled_shapes import check_compiled_shapes


@pytest.mark.parametrize(
    "jit_compile, batch_sizes, lengths, split_batches, refused",
    [
        (True, [1], [16], True, False),
        (True, None, None, False, False),
        (False, None, None, True, False),
        (False, [1, 8], None, True, True),
        (False, None, [16], True, True),
        (False, None, None, False, True),
    ],
)
def test_shapes_go_with_jit_compile_alone(jit_compile, batch_sizes, lengths, split_batches,
                                          refused):  # fmt: skip
    if refused:
        with pytest.raises(ValueError, match="shapes of `jit_compile=True`"):
            check_compiled_shapes(jit_compile, batch_sizes, lengths, split_batches)
    else:
        check_compiled_shapes(jit_compile, batch_sizes, lengths, split_batches)


def test_the_translator_checks_them(trained_model):
    from keras_transformer.decoding import Translator

    with pytest.raises(ValueError, match="shapes of `jit_compile=True`"):
        Translator(*trained_model, lengths=[16])
