"""AdamW's decoupled weight decay reaches the weight matrices and embeddings of kzoo's models, never a bias or a layer
norm's gamma or beta: `kzoo.models.weight_decay.decay_weights_only`, and the BERT tasks' default optimizer through it.

With zero gradients Adam's moments stay zero and its step is zero, so after one step only the decay has moved a
weight: a decayed variable is exactly (1 - learning_rate · weight_decay) of itself, an excluded one is unchanged.
"""

import keras
import numpy as np

from kzoo.models import Bert, BertClassifier
from kzoo.models.weight_decay import NOT_DECAYED, decay_weights_only

TINY = dict(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=16)


def step_with_zero_gradients(optimizer, variables):
    """One optimizer step on `variables` with zero gradients; returns (name, before, after) for each variable."""
    for variable in variables:  # non-zero biases and offsets, so that a decay of them would show
        if variable.name.endswith(("bias", "beta")):
            variable.assign(np.full(variable.shape, 0.5, "float32"))
    before = [np.array(variable) for variable in variables]
    optimizer.apply([keras.ops.zeros(variable.shape) for variable in variables], variables)
    return [(variable.path, old, np.array(variable)) for variable, old in zip(variables, before)]


def assert_decay_only_on_weights(steps, factor):
    decayed = set()
    for path, old, new in steps:
        if path.endswith(NOT_DECAYED):
            np.testing.assert_array_equal(new, old, err_msg=path)
        else:
            np.testing.assert_allclose(new, old * factor, rtol=1e-6, err_msg=path)
            decayed.add(path.split("/")[-1])
    return decayed


def test_decay_weights_only_spares_biases_and_layer_norms():
    inputs = keras.Input((4,), dtype="int32")
    x = keras.layers.Embedding(10, 8, name="embedding")(inputs)
    x = keras.layers.LayerNormalization(name="norm")(keras.layers.Dense(8, name="dense")(x))
    model = keras.Model(inputs, x)
    optimizer = decay_weights_only(keras.optimizers.AdamW(0.5, weight_decay=0.1))
    steps = step_with_zero_gradients(optimizer, model.trainable_variables)
    decayed = assert_decay_only_on_weights(steps, 1 - 0.5 * 0.1)
    assert decayed == {"embeddings", "kernel"}
    assert sum(path.endswith(NOT_DECAYED) for path, _, _ in steps) == 3  # dense bias, norm gamma and beta


def test_bert_tasks_default_optimizer_decays_only_weights():
    classifier = BertClassifier(Bert(**TINY), num_classes=3)
    classifier.compile()  # the task's default: AdamW(5e-5, weight_decay 0.01)
    optimizer = classifier.optimizer
    assert isinstance(optimizer, keras.optimizers.AdamW)
    assert float(optimizer.weight_decay) == 0.01
    steps = step_with_zero_gradients(optimizer, classifier.trainable_variables)
    decayed = assert_decay_only_on_weights(steps, 1 - float(optimizer.learning_rate) * 0.01)
    assert {"embeddings", "kernel"} <= decayed
    assert any(path.endswith("gamma") for path, _, _ in steps) and any(path.endswith("bias") for path, _, _ in steps)
