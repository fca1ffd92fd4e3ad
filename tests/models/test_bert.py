import pathlib
import tempfile

import keras
import numpy as np
import pytest

import kzoo
from kzoo.models import Bert

TINY = dict(vocabulary_size=100, num_layers=2, hidden_dim=16, num_heads=2, max_sequence_length=12)
INPUTS = {
    "token_ids": np.array([[2, 5, 6, 7, 3, 0], [2, 8, 9, 3, 10, 3]], dtype="int32"),
    "segment_ids": np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1]], dtype="int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]], dtype="int32"),
}


def test_outputs_save_and_reload():
    model = Bert(**TINY)
    outputs = model(INPUTS)
    sequence, pooled = np.asarray(outputs["sequence_output"]), np.asarray(outputs["pooled_output"])
    assert sequence.shape == (2, 6, 16) and pooled.shape == (2, 16)
    kernel, bias = (np.asarray(w) for w in model.pooler.weights)
    np.testing.assert_allclose(pooled, np.tanh(sequence[:, 0] @ kernel + bias), atol=1e-5)  # tanh dense on [CLS]
    assert Bert.from_config(model.get_config()).get_config() == model.get_config()
    path = pathlib.Path(tempfile.mkdtemp()) / "bert.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(restored(INPUTS)["sequence_output"]), sequence, atol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_keeps_float32_variables_and_finite_outputs(policy):
    model = Bert(**TINY, dtype=policy)
    outputs = model(INPUTS)
    assert all(w.dtype == "float32" for w in model.weights)
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(keras.ops.cast(outputs["sequence_output"], "float32"))))


def test_padding_does_not_change_real_positions():
    model = Bert(**TINY)
    short = {name: value[:1, :5] for name, value in INPUTS.items()}
    padded = {name: value[:1] for name, value in INPUTS.items()}
    np.testing.assert_allclose(
        np.asarray(model(padded)["sequence_output"])[:, :5], np.asarray(model(short)["sequence_output"]), atol=1e-5
    )


@pytest.mark.parametrize(
    "preset, expected",
    [("bert_tiny", 4_385_920), ("bert_mini", 11_170_560), ("bert_small", 28_763_648),
     ("bert_medium", 41_373_184), ("bert_base", 109_482_240), ("bert_large", 335_141_888)],
)
@pytest.mark.backend_independent
def test_presets_have_the_published_parameter_counts(preset, expected):
    model = getattr(kzoo, preset)()
    assert model.count_params() == expected
    assert model.name == preset


def test_exact_gelu_and_original_epsilon_by_default():
    model = kzoo.bert_tiny()
    block = model.encoder_blocks[0]
    assert block.layer_norm_epsilon == 1e-12 and model.embeddings_norm.epsilon == 1e-12
    x = np.linspace(-3, 3, 7).astype("float32")
    exact = keras.ops.convert_to_numpy(keras.activations.gelu(x, approximate=False))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(block.activation(x)), exact)
