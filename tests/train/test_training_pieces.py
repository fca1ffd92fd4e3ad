import keras
import numpy as np
import pytest

from kzoo.metrics import MaskedAccuracy
from kzoo.models.weight_decay import NOT_DECAYED
from kzoo.train import MaskedCrossEntropy, TimeBudget, TransformerSchedule, average_weights


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_label_smoothed_loss_matches_the_definition_and_ignores_padding(smoothing):
    rng = np.random.default_rng(0)
    labels = np.array([[5, 2, 0, 0], [1, 7, 3, 0]])
    logits = rng.normal(size=(2, 4, 10)).astype("float32")
    target = np.full((2, 4, 10), smoothing / 10)
    target[np.arange(2)[:, None], np.arange(4), labels] += 1 - smoothing
    per_token = -(target * log_softmax(logits.astype("float64"))).sum(-1)
    expected = per_token[labels != 0].mean()
    actual = float(MaskedCrossEntropy(label_smoothing=smoothing)(labels, logits))
    np.testing.assert_allclose(actual, expected, rtol=1e-5)
    # Changing the logits at padded positions changes nothing.
    logits[0, 2:] += 100.0
    np.testing.assert_allclose(float(MaskedCrossEntropy(label_smoothing=smoothing)(labels, logits)), expected,
                               rtol=1e-5)


def test_masked_accuracy_counts_real_tokens_only():
    labels = np.array([[5, 2, 0, 0]])
    logits = np.zeros((1, 4, 8), "float32")
    logits[0, 0, 5] = 1.0  # right
    logits[0, 1, 4] = 1.0  # wrong
    metric = MaskedAccuracy()
    metric.update_state(labels, logits)
    assert float(metric.result()) == 0.5


def test_schedule_is_the_papers_formula():
    schedule = TransformerSchedule(hidden_dim=512, warmup_steps=4000)
    for step in (1, 100, 4000, 4001, 50000):
        expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
        np.testing.assert_allclose(float(schedule(step - 1)), expected, rtol=1e-5)
    assert TransformerSchedule.from_config(schedule.get_config()).get_config() == schedule.get_config()


def test_averaging_checkpoints_gives_the_mean_weights(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    saved = []
    for i in range(3):
        model.set_weights([np.full((3, 2), float(i)), np.full((2,), 10.0 * i)])
        model.save_weights(tmp_path / f"{i}.weights.h5")
        saved.append(str(tmp_path / f"{i}.weights.h5"))
    average_weights(model, saved)
    np.testing.assert_allclose(model.get_weights()[0], 1.0)
    np.testing.assert_allclose(model.get_weights()[1], 10.0)


def test_time_budget_stops_before_an_epoch_would_overrun():
    budget = TimeBudget(minutes=1.0)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.stop_training = False  # as fit() starts
    budget.set_model(model)
    budget.on_train_begin()
    budget.on_epoch_begin(0)
    budget.start -= 20.0
    budget.epoch_start -= 20.0  # the first epoch took 20 s: a second one still fits in 60 s
    budget.on_epoch_end(0)
    assert not model.stop_training
    budget.on_epoch_begin(1)
    budget.start -= 25.0
    budget.epoch_start -= 25.0  # 45 s gone, the next epoch would need 25 s more
    budget.on_epoch_end(1)
    assert model.stop_training and budget.stopped_epoch == 1


def test_weight_decay_shrinks_matrices_and_embeddings_but_not_biases_or_norms():
    from kzoo.train.translation_recipe import TranslationConfig, build_model, compile_model

    config = TranslationConfig(encoder_layers=1, decoder_layers=1, hidden_dim=32, num_heads=2, intermediate_dim=64,
                               weight_decay=0.1)
    model = build_model(config, vocabulary_size=300)
    compile_model(model, config)
    assert isinstance(model.optimizer, keras.optimizers.AdamW)
    variables = model.trainable_variables
    for variable in variables:  # non-zero biases and offsets, so that a decay of them would show
        if variable.name.endswith(("bias", "beta")):
            variable.assign(np.full(variable.shape, 0.5))
    before = [np.array(v) for v in variables]
    learning_rate = float(model.optimizer.learning_rate)
    # Zero gradients move nothing through Adam's moments, so the decay alone changes the weights.
    model.optimizer.apply_gradients([(np.zeros(v.shape, "float32"), v) for v in variables])
    decayed = set()
    for variable, old in zip(variables, before):
        new = np.array(variable)
        if variable.name.endswith(NOT_DECAYED):
            np.testing.assert_array_equal(new, old, err_msg=variable.path)
        else:
            np.testing.assert_allclose(new, old * (1 - 0.1 * learning_rate), rtol=1e-6, err_msg=variable.path)
            decayed.add(variable.path.split("/")[-1])
    assert decayed == {"embeddings", "kernel", "query_kernel", "key_kernel", "value_kernel", "output_kernel"}
    assert 0 < learning_rate < 1e-3


def test_without_weight_decay_the_recipe_trains_with_plain_adam():
    from kzoo.train.translation_recipe import TranslationConfig, build_model, compile_model

    config = TranslationConfig(encoder_layers=1, decoder_layers=1, hidden_dim=32, num_heads=2, intermediate_dim=64)
    model = build_model(config, vocabulary_size=300)
    compile_model(model, config)
    assert type(model.optimizer) is keras.optimizers.Adam
