import keras
import numpy as np
import pytest
import tensorflow as tf

import kzoo
from kzoo.models import Transformer
from tests.harness import run_model_test

TINY = dict(
    source_vocabulary_size=50,
    target_vocabulary_size=40,
    num_encoder_layers=2,
    num_decoder_layers=2,
    hidden_dim=16,
    num_heads=2,
    intermediate_dim=32,
    max_sequence_length=16,
)
INPUTS = {
    "encoder_token_ids": np.array([[5, 6, 7, 8, 0, 0], [9, 10, 11, 12, 13, 14]], dtype="int32"),
    "decoder_token_ids": np.array([[1, 20, 21, 0, 0], [1, 22, 23, 24, 25]], dtype="int32"),
}


@pytest.mark.parametrize(
    "options",
    [
        {},
        # The variants repeat the harness's save/load and fit checks (13 s each): run with `make test-slow`.
        pytest.param({"position_encoding": "learned", "tie_output_embedding": False}, marks=pytest.mark.slow),
        pytest.param({"normalize_first": True, "activation": "gelu"}, marks=pytest.mark.slow),
    ],
    ids=["paper", "learned-untied", "pre-ln"],
)
def test_model_harness(options):
    run_model_test(Transformer, {**TINY, **options}, INPUTS, expected_output_shape=(2, 5, 40))


def test_shared_embeddings_are_one_matrix():
    model = Transformer(**{**TINY, "target_vocabulary_size": 50, "share_embeddings": True})
    assert model.source_embedding is model.target_embedding
    unshared = Transformer(**{**TINY, "target_vocabulary_size": 50})
    assert unshared.count_params() - model.count_params() == 50 * 16


@pytest.mark.backend_independent
def test_paper_parameter_counts():
    # Vaswani et al. (2017), Table 3, with a 37,000-token shared vocabulary and tied embeddings: base "65M",
    # big "213M". Counting every weight exactly, base is 63.1M (the paper's figure is rounded up) and big 214.2M.
    base = kzoo.transformer_base()
    assert base.count_params() == 63_082_496
    assert abs(base.count_params() - 65e6) / 65e6 < 0.05
    del base
    big = kzoo.transformer_big()
    assert big.count_params() == 214_245_376
    assert abs(big.count_params() - 213e6) / 213e6 < 0.01


@pytest.mark.backend_independent
def test_presets_take_overrides():
    model = kzoo.transformer_small(vocabulary_size=300, target_vocabulary_size=200, num_encoder_layers=1)
    assert model.num_encoder_layers == 1 and model.num_decoder_layers == 3
    assert not model.share_embeddings
    assert model(INPUTS).shape == (2, 5, 200)


def test_shared_embeddings_need_one_vocabulary():
    with pytest.raises(ValueError, match="source_vocabulary_size=50 and target_vocabulary_size=40"):
        Transformer(**TINY, share_embeddings=True)


def test_bad_position_encoding_names_the_choices():
    with pytest.raises(ValueError, match="position_encoding='rotary'"):
        Transformer(**{**TINY, "position_encoding": "rotary"})


def reversal_dataset(num_examples, length, vocabulary_size, batch_size):
    rng = np.random.default_rng(0)
    source = rng.integers(3, vocabulary_size, size=(num_examples, length)).astype("int32")
    target = source[:, ::-1]
    start = np.ones((num_examples, 1), "int32")
    decoder_inputs = np.concatenate([start, target[:, :-1]], axis=1)
    features = {"encoder_token_ids": source, "decoder_token_ids": decoder_inputs}
    return tf.data.Dataset.from_tensor_slices((features, target)).batch(batch_size)


def test_fit_learns_to_reverse_under_the_chosen_strategy():
    with kzoo.train.strategy().scope():
        model = Transformer(
            source_vocabulary_size=12, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=32, num_heads=4,
            intermediate_dim=64, dropout=0.0, share_embeddings=True,
        )
        model.compile(
            optimizer=keras.optimizers.Adam(3e-3),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
    history = model.fit(reversal_dataset(512, 6, 12, 32), epochs=12, verbose=0).history
    assert history["loss"][-1] < 0.25 * history["loss"][0]
    assert history["accuracy"][-1] > 0.9
