import pathlib
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.layers import MaskedLMHead
from kzoo.models import Bert, BertClassifier, BertPretrainer, BertQuestionAnswerer, BertTokenClassifier
from tests.harness import run_layer_test, run_model_test

TINY = dict(vocabulary_size=40, num_layers=2, hidden_dim=16, num_heads=2, max_sequence_length=12)
BATCH, SEQ = 4, 10


def features(seed=0, batch=BATCH):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, TINY["vocabulary_size"], size=(batch, SEQ)).astype("int32")
    padding_mask = np.ones((batch, SEQ), "int32")
    padding_mask[0, 7:] = 0
    token_ids[0, 7:] = 0
    segment_ids = np.zeros((batch, SEQ), "int32")
    segment_ids[:, 5:] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def layer_norm(x, epsilon=1e-12):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + epsilon)


def log_softmax(logits):
    logits = logits - logits.max(-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def test_masked_lm_head_layer():
    run_layer_test(
        MaskedLMHead,
        {"vocabulary_size": 30},
        {"sequence": np.random.default_rng(0).normal(size=(2, 6, 8)).astype("float32"),
         "masked_positions": np.array([[1, 4, 0], [5, 2, 3]], "int32")},
        expected_output_shape=(2, 3, 30),
        expected_num_trainable_weights=6,
        expected_num_params=8 * 8 + 8 + 2 * 8 + 8 * 30 + 30,
        run_mixed_precision=False,  # its logits are float32 by design; checked in the pretrainer test below
    )


def test_tied_masked_lm_head_matches_the_formula():
    backbone = Bert(**TINY)
    pretrainer = BertPretrainer(backbone)
    x = {**features(), "masked_positions": np.array([[1, 3, 0], [2, 2, 9], [4, 8, 6], [9, 1, 5]], "int32")}
    head = pretrainer.masked_lm_head
    head.output_bias.assign(np.linspace(-1, 1, TINY["vocabulary_size"]).astype("float32"))
    logits = np.asarray(pretrainer(x)["mlm"])
    sequence = np.asarray(backbone({k: v for k, v in x.items() if k != "masked_positions"})["sequence_output"])
    gathered = np.take_along_axis(sequence, x["masked_positions"][..., None], axis=1)
    kernel, bias = (np.asarray(w) for w in head.dense.weights)
    hidden = keras.ops.convert_to_numpy(keras.activations.gelu(gathered @ kernel + bias, approximate=False))
    gamma, beta = (np.asarray(w) for w in head.norm.weights)
    hidden = layer_norm(hidden) * gamma + beta
    expected = hidden @ np.asarray(backbone.token_embedding.embeddings).T + np.asarray(head.output_bias)
    np.testing.assert_allclose(logits, expected, atol=1e-4)
    # Tied: the head owns no output matrix, only its transform, norm and bias.
    hidden_dim = TINY["hidden_dim"]
    head_params = hidden_dim * hidden_dim + hidden_dim + 2 * hidden_dim + TINY["vocabulary_size"]
    assert pretrainer.count_params() == backbone.count_params() + head_params + 2 * hidden_dim + 2


def pretraining_batch(seed=0):
    rng = np.random.default_rng(seed)
    positions = np.stack([rng.choice(np.arange(1, 7), size=3, replace=False) for _ in range(BATCH)])
    x = {**features(seed), "masked_positions": positions.astype("int32")}
    labels = {"mlm": rng.integers(5, TINY["vocabulary_size"], size=(BATCH, 3)).astype("int32"),
              "nsp": np.array([0, 1, 1, 0], "int32")}
    labels["mlm"][:, 2] = 0  # unused slots
    x["masked_positions"][:, 2] = 0
    weights = {"mlm": (labels["mlm"] > 0).astype("float32"), "nsp": np.ones(BATCH, "float32")}
    return x, labels, weights


def test_pretrainer_loss_is_mlm_mean_over_real_slots_plus_nsp():
    pretrainer = BertPretrainer(Bert(**TINY, dropout=0.0))
    pretrainer.compile()
    x, labels, weights = pretraining_batch()
    outputs = {name: np.asarray(value) for name, value in pretrainer(x).items()}
    mlm_nll = -np.take_along_axis(log_softmax(outputs["mlm"]), labels["mlm"][..., None], -1)[..., 0]
    expected_mlm = (mlm_nll * weights["mlm"]).sum() / weights["mlm"].sum()
    expected_nsp = -np.take_along_axis(log_softmax(outputs["nsp"]), labels["nsp"][:, None], -1).mean()
    for sample_weight in (weights, None):  # unused slots (label 0) are skipped with or without sample weights
        result = pretrainer.evaluate(x, labels, sample_weight=sample_weight, batch_size=BATCH, verbose=0,
                                     return_dict=True)
        np.testing.assert_allclose(result["mlm_loss"], expected_mlm, rtol=1e-4)
        np.testing.assert_allclose(result["nsp_loss"], expected_nsp, rtol=1e-4)
        np.testing.assert_allclose(result["loss"], expected_mlm + expected_nsp, rtol=1e-4)
    predicted = outputs["mlm"].argmax(-1)
    real = weights["mlm"] > 0
    np.testing.assert_allclose(result["mlm_accuracy"], (predicted == labels["mlm"])[real].mean(), rtol=1e-6)
    np.testing.assert_allclose(result["nsp_accuracy"], (outputs["nsp"].argmax(-1) == labels["nsp"]).mean())


def test_pretrainer_learns_and_round_trips():
    pretrainer = BertPretrainer(Bert(**TINY, dropout=0.0))
    pretrainer.compile(optimizer=keras.optimizers.Adam(3e-3))
    x, labels, weights = pretraining_batch()
    initial = pretrainer.evaluate(x, labels, sample_weight=weights, verbose=0, return_dict=True)
    np.testing.assert_allclose(initial["mlm_loss"], np.log(TINY["vocabulary_size"]), rtol=0.1)  # near uniform
    pretrainer.fit(tf.data.Dataset.from_tensors((x, labels, weights)).repeat(150), verbose=0)
    result = pretrainer.evaluate(x, labels, sample_weight=weights, verbose=0, return_dict=True)
    assert result["mlm_loss"] < 0.2 * initial["mlm_loss"]
    assert result["mlm_accuracy"] == 1.0 and result["nsp_accuracy"] == 1.0
    path = pathlib.Path(tempfile.mkdtemp()) / "pretrainer.keras"
    pretrainer.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(restored(x)["mlm"]), np.asarray(pretrainer(x)["mlm"]), atol=1e-5)
    assert restored.get_config() == pretrainer.get_config()
    # load_model compiles it as it was saved: the optimizer comes back with its state, so training can go on.
    assert type(restored.optimizer) is keras.optimizers.Adam and int(restored.optimizer.iterations) == 150
    for saved, loaded in zip(pretrainer.optimizer.variables, restored.optimizer.variables, strict=True):
        np.testing.assert_array_equal(np.asarray(loaded), np.asarray(saved))


def test_heads_share_the_backbone_weights():
    backbone = Bert(**TINY)
    classifier = BertClassifier(backbone, num_classes=3)
    assert classifier.backbone is backbone
    before = np.asarray(backbone.pooler.weights[0]).copy()
    classifier.compile(optimizer=keras.optimizers.SGD(0.5))
    classifier.fit(features(), np.array([0, 1, 2, 1]), verbose=0)
    assert not np.allclose(np.asarray(backbone.pooler.weights[0]), before)


@pytest.mark.parametrize(
    "head, output_shape",
    [(lambda backbone: BertClassifier(backbone, num_classes=3), (BATCH, 3)),
     (lambda backbone: BertClassifier(backbone, num_classes=3, pooling="mean"), (BATCH, 3)),
     (lambda backbone: BertTokenClassifier(backbone, num_classes=5), (BATCH, SEQ, 5))],
)
def test_classifier_heads_through_the_harness(head, output_shape):
    run_model_test(lambda dtype=None: head(Bert(**TINY, dtype=dtype)), {}, features(), output_shape)


def test_classifier_learns_a_rule_and_reads_the_second_segment():
    rng = np.random.default_rng(1)
    x = features(seed=1, batch=64)
    x["padding_mask"][:] = 1
    x["token_ids"] = rng.integers(5, 9, size=(64, SEQ)).astype("int32")
    labels = (x["token_ids"][:, 5:] == 5).any(axis=1).astype("int32")  # does segment B hold token 5?
    classifier = BertClassifier(Bert(**TINY, dropout=0.0), num_classes=2)
    classifier.compile(optimizer=keras.optimizers.Adam(3e-3))
    classifier.fit(x, labels, batch_size=16, epochs=40, verbose=0)
    assert classifier.evaluate(x, labels, verbose=0, return_dict=True)["accuracy"] >= 0.95
    swapped = {**x, "segment_ids": 1 - x["segment_ids"]}
    assert not np.allclose(classifier.predict(swapped, verbose=0), classifier.predict(x, verbose=0))


def test_token_classifier_skips_ignored_positions_and_learns_tags():
    x = features(seed=2, batch=32)
    labels = x["token_ids"] % 3
    labels[x["padding_mask"] == 0] = -100
    tagger = BertTokenClassifier(Bert(**TINY, dropout=0.0), num_classes=3)
    tagger.compile(optimizer=keras.optimizers.Adam(3e-3))
    changed = labels.copy()
    changed[labels == -100] = -100
    changed[0, 7:] = -100
    first = tagger.evaluate(x, labels, verbose=0, return_dict=True)
    logits = tagger.predict(x, verbose=0)
    real = labels != -100
    nll = -np.take_along_axis(log_softmax(logits), np.where(real, labels, 0)[..., None], -1)[..., 0]
    np.testing.assert_allclose(first["loss"], nll[real].mean(), rtol=1e-4)
    tagger.fit(x, labels, batch_size=8, epochs=30, verbose=0)
    assert tagger.evaluate(x, labels, verbose=0, return_dict=True)["accuracy"] >= 0.95
    with pytest.raises(ValueError, match="ignore_label=1 is a real class"):
        BertTokenClassifier(Bert(**TINY), num_classes=3, ignore_label=1)


def test_question_answerer_spans():
    reader = BertQuestionAnswerer(Bert(**TINY, dropout=0.0))
    x = features(seed=3, batch=48)
    x["padding_mask"][:] = 1
    rng = np.random.default_rng(3)
    x["token_ids"] = rng.integers(9, TINY["vocabulary_size"], size=(48, SEQ)).astype("int32")
    starts = rng.integers(5, 8, size=48)
    ends = starts + rng.integers(0, 2, size=48)
    x["token_ids"][np.arange(48), starts] = 5  # the answer opens with token 5 ...
    x["token_ids"][np.arange(48), ends + 1] = 6  # ... and ends just before token 6
    x["padding_mask"][0, 9:] = 0
    outputs = reader(x)
    assert np.all(np.asarray(outputs["start"])[0, 9:] < -1e8) and np.all(np.asarray(outputs["end"])[0, 9:] < -1e8)
    reader.compile(optimizer=keras.optimizers.Adam(3e-3))
    reader.fit(x, {"start": starts, "end": ends}, batch_size=16, epochs=40, verbose=0)
    outputs = reader.predict(x, verbose=0)
    best_start, best_end = (np.asarray(v) for v in reader.best_spans(outputs["start"], outputs["end"]))
    assert np.mean((best_start == starts) & (best_end == ends)) >= 0.9


def test_best_spans_respects_order_and_length():
    start = np.array([[0.0, 5.0, 0.0, 0.0, 9.0]], "float32")
    end = np.array([[0.0, 0.0, 4.0, 8.0, 1.0]], "float32")
    s, e = (np.asarray(v) for v in BertQuestionAnswerer.best_spans(start, end, max_answer_length=3))
    assert (s[0], e[0]) == (1, 3)  # 5 + 8 = 13; the best start (4) has only itself as an end: 9 + 1
    s, e = (np.asarray(v) for v in BertQuestionAnswerer.best_spans(start, end, max_answer_length=2))
    assert (s[0], e[0]) == (4, 4)  # (1, 3) is three tokens long now: (4, 4) = 10 beats (1, 2) = 9


def test_mean_pooling_classifier_reads_the_mean_of_the_real_tokens():
    backbone = Bert(**TINY, dropout=0.0)
    classifier = BertClassifier(backbone, num_classes=3, pooling="mean", dropout=0.0)
    x = features()
    sequence = np.asarray(backbone(x)["sequence_output"])
    mask = x["padding_mask"][:, :, None]
    mean = (sequence * mask).sum(1) / mask.sum(1)
    kernel, bias = classifier.output_dense.get_weights()
    np.testing.assert_allclose(classifier.predict(x, verbose=0), mean @ kernel + bias, atol=1e-5)
    changed_padding = {**x, "token_ids": np.where(x["padding_mask"] == 1, x["token_ids"], 7)}
    np.testing.assert_allclose(classifier.predict(changed_padding, verbose=0), classifier.predict(x, verbose=0),
                               atol=1e-6)  # padded positions do not count
    with pytest.raises(ValueError, match="pooling='max' is not a pooling"):
        BertClassifier(backbone, num_classes=2, pooling="max")
