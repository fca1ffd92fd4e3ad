import keras
import numpy as np
import pytest

from kzoo.models import BertClassifier, bert_tiny
from kzoo.train import LayerwiseAdamW, WarmupLinearDecay, bert_layer_decay

GRADIENTS = [np.array([[0.3, -0.2], [0.05, 1.0]], "float32"), np.array([-0.4, 0.1], "float32"),
             np.array([2.0, -3.0, 0.5], "float32")]
START = [np.array([[1.0, -2.0], [0.5, 0.25]], "float32"), np.array([0.3, -0.7], "float32"),
         np.array([1.5, 0.0, -1.0], "float32")]


def _train(optimizer, names, steps=6):
    variables = [keras.Variable(value, name=name) for value, name in zip(START, names)]
    for step in range(steps):
        optimizer.apply([g * (1 + 0.5 * step) for g in GRADIENTS], variables)
    return [v.numpy() for v in variables]


def test_layerwise_adamw_is_adamw_with_each_variables_own_learning_rate():
    schedule = WarmupLinearDecay(1e-2, total_steps=10, warmup_steps=2)
    names = ["encoder_block_0_kernel", "head_bias", "other"]
    layerwise = LayerwiseAdamW({"^encoder_block_0": 0.5, "bias$": 0.25}, learning_rate=schedule, weight_decay=0.1)
    found = _train(layerwise, names)
    for i, factor in enumerate([0.5, 0.25, 1.0]):  # "other" matches no pattern: the full rate
        scaled = WarmupLinearDecay(1e-2 * factor, total_steps=10, warmup_steps=2)
        expected = _train(keras.optimizers.AdamW(scaled, weight_decay=0.1), names)[i]
        np.testing.assert_allclose(found[i], expected, rtol=1e-6, atol=1e-7)
    # One step by hand: after the decay w ← w - w · wd · lr, Adam's first step is lr · g / (|g| + ε / √(1 - β₂))
    # (Keras adds ε to √v before the bias correction).
    first = _train(LayerwiseAdamW({"kernel": 0.5}, learning_rate=0.1, weight_decay=0.1), names, steps=1)[0]
    lr, g = 0.05, GRADIENTS[0]
    expected = START[0] * (1 - 0.1 * lr) - lr * g / (np.abs(g) + 1e-7 / np.sqrt(1 - 0.999))
    np.testing.assert_allclose(first, expected, rtol=1e-6, atol=1e-6)  # atol: float32 arithmetic


def test_layerwise_adamw_skips_the_decay_of_excluded_variables():
    layerwise = LayerwiseAdamW({"bias": 0.5}, learning_rate=0.1, weight_decay=0.5)
    layerwise.exclude_from_weight_decay(var_names=["head_bias"])
    reference = keras.optimizers.AdamW(0.05, weight_decay=0.5)
    reference.exclude_from_weight_decay(var_names=["head_bias"])
    names = ["kernel", "head_bias", "other"]
    np.testing.assert_allclose(_train(layerwise, names)[1], _train(reference, names)[1], rtol=1e-6)


def test_layerwise_adamw_serializes_and_rejects_bad_factors():
    optimizer = LayerwiseAdamW(bert_layer_decay(2, 0.5), learning_rate=3e-4, weight_decay=0.01)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored, LayerwiseAdamW)
    assert restored.learning_rate_multipliers == optimizer.learning_rate_multipliers
    assert restored.multiplier("encoder_block_1/feed_forward/output_dense/kernel") == 0.5
    with pytest.raises(ValueError, match=r"learning_rate_multipliers\['pooler'\]=0 must be positive"):
        LayerwiseAdamW({"pooler": 0})
    with pytest.raises(ValueError, match=r"pattern '\(' is not a regular expression"):
        LayerwiseAdamW({"(": 0.5})
    with pytest.raises(ValueError, match=r"decay=1.5 must be in \(0, 1\]"):
        bert_layer_decay(2, 1.5)


def test_bert_layer_decay_gives_each_layer_of_a_bert_its_factor():
    keras.utils.set_random_seed(0)
    classifier = BertClassifier(bert_tiny(vocabulary_size=100), num_classes=2)
    optimizer = LayerwiseAdamW(bert_layer_decay(2, 0.5), learning_rate=1e-3)
    optimizer.build(classifier.trainable_variables)
    factors = {v.path: m for v, m in zip(classifier.trainable_variables, optimizer._multipliers)}

    def expected(path):
        if path.split("/")[0] in ("token_embedding", "segment_embedding", "position_embedding", "embeddings_norm"):
            return 0.125  # 0.5 ** (2 + 1)
        if path.startswith("encoder_block_"):
            return 0.5 ** (2 - int(path.split("/")[0][-1]))
        assert path.split("/")[0] in ("pooler", "logits"), path
        return 1.0

    assert factors == {path: expected(path) for path in factors}
    assert sorted(set(factors.values())) == [0.125, 0.25, 0.5, 1.0]
    assert factors["encoder_block_0/feed_forward/output_dense/kernel"] == 0.25
