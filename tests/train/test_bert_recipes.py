import dataclasses
import itertools
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.data import resolve_data_path
from kzoo.data.wikitext import wikitext2_file, wikitext_documents
from kzoo.models import BertPretrainer
from kzoo.train import LayerwiseAdamW, bert_finetuning_recipe, bert_pretraining_recipe
from kzoo.train.bert_finetuning_recipe import FinetuningConfig, backbone_and_preprocessor, dev_scores
from kzoo.train.bert_pretraining_recipe import PretrainingConfig

ARTICLES = list(itertools.islice(wikitext_documents(wikitext2_file("valid")), 14))


CONFIG = PretrainingConfig(
    preset="bert_tiny", sequence_length=64, batch_size=16, max_predictions=10, learning_rate=2e-3, train_steps=90,
    steps_per_epoch=30, validation_batches=3,
)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    output = tmp_path_factory.mktemp("pretraining")
    _, history, results = bert_pretraining_recipe.train(
        CONFIG, output, verbose=0, train_documents=lambda: ARTICLES[2:], validation_documents=lambda: ARTICLES[:2]
    )
    return output, history.history, results


def test_pretraining_lowers_the_masked_lm_loss_and_writes_the_run(pretrained):
    output, history, results = pretrained
    # The same validation batches (the recipe's seed + 1) through an untrained model of the same size.
    preprocessor = bert_pretraining_recipe.text_preprocessor(CONFIG)
    vocabulary = preprocessor.vocabulary
    batches = bert_pretraining_recipe.pretraining_batches(
        CONFIG, preprocessor, lambda: ARTICLES[:2], CONFIG.seed + 1
    ).take(CONFIG.validation_batches).apply(tf.data.experimental.assert_cardinality(CONFIG.validation_batches))
    untrained = BertPretrainer(bert_pretraining_recipe.build_backbone(CONFIG, len(vocabulary)))
    untrained.compile()
    before = untrained.evaluate(batches, verbose=0, return_dict=True)
    assert before["mlm_loss"] == pytest.approx(np.log(len(vocabulary)), rel=0.05)  # about uniform
    assert history["val_mlm_loss"][-1] < before["mlm_loss"] - 1.5, (before, history["val_mlm_loss"])
    assert history["val_mlm_accuracy"][-1] > 0.03 > before["mlm_accuracy"]
    assert history["val_loss"] == pytest.approx(np.add(history["val_mlm_loss"], history["val_nsp_loss"]), rel=1e-4)
    assert results["steps"] == 90
    assert sorted(p.name for p in (output / "checkpoints").iterdir()) == [f"epoch_00{i}.weights.h5" for i in (1, 2, 3)]
    assert (output / "vocab.txt").read_text() == resolve_data_path(CONFIG.vocabulary).read_text()
    assert json.loads((output / "config.json").read_text())["vocabulary"] == "kzoo:wikitext2/vocab.txt"
    assert json.loads((output / "scores.json").read_text())["val_mlm_loss"] == round(history["val_mlm_loss"][-1], 4)


def test_fine_tuning_starts_from_the_pretrained_backbone(pretrained, tmp_path):
    output, _, _ = pretrained
    config = FinetuningConfig(task="mrpc", backbone=str(output / "backbone.keras"), sequence_length=64,
                              train_steps=4, epochs=1, train_examples=64, dev_examples=32, layer_decay=0.5)
    backbone, preprocessor = backbone_and_preprocessor(config)
    assert backbone.num_layers == 2 and backbone.hidden_dim == 128 and backbone.dropout == config.dropout
    assert preprocessor.vocabulary == (output / "vocab.txt").read_text().splitlines()
    assert preprocessor.sequence_length == 64 and preprocessor.lowercase
    assert backbone_and_preprocessor(dataclasses.replace(config, dropout=0.3))[0].dropout == 0.3  # --dropout counts
    with pytest.raises(ValueError, match="sequence_length=256 is longer than the backbone's 64 learned positions"):
        backbone_and_preprocessor(dataclasses.replace(config, sequence_length=256))
    classifier, results = bert_finetuning_recipe.train(config, tmp_path, verbose=0)
    assert results["steps"] == 4 and results["backbone"] == config.backbone
    assert json.loads((tmp_path / "scores.json").read_text())["dev"] == results["dev"]
    # --layer-decay 0.5 on 2 blocks: the bottom block learns at a quarter of the rate, and the saved classifier
    # keeps its optimizer's factors.
    saved = keras.saving.load_model(tmp_path / "classifier.keras")
    for optimizer in (classifier.optimizer, saved.optimizer):
        assert isinstance(optimizer, LayerwiseAdamW)
        assert optimizer.multiplier("encoder_block_0/feed_forward/output_dense/kernel") == 0.25
        assert optimizer.multiplier("token_embedding/embeddings") == 0.125
        assert optimizer.multiplier("logits/kernel") == 1.0
    assert int(saved.optimizer.iterations) == 4
    random, _ = backbone_and_preprocessor(dataclasses.replace(FinetuningConfig(), sequence_length=64))
    assert random.num_layers == 4 and random.hidden_dim == 256  # the baseline has bert_mini's size
    assert random.vocabulary_size == 8192 and random.max_sequence_length == 128
    assert saved.preprocessor.get_config() == classifier.preprocessor.get_config()  # the run's tokenizer travels
    assert (tmp_path / "vocab.txt").read_text() == (output / "vocab.txt").read_text()


def test_fine_tuning_can_keep_the_token_embedding_table(pretrained, tmp_path):
    output, _, _ = pretrained
    config = FinetuningConfig(task="sst2", backbone=str(output / "backbone.keras"), sequence_length=32,
                              train_steps=3, epochs=1, train_examples=96, dev_examples=16, trim_padding=True,
                              group_by_length=True, freeze_token_embedding=True)
    before, _ = backbone_and_preprocessor(config)
    classifier, results = bert_finetuning_recipe.train(config, tmp_path, verbose=0)
    after = classifier.backbone
    assert not after.token_embedding.trainable and results["steps"] == 3
    np.testing.assert_array_equal(after.token_embedding.get_weights()[0], before.token_embedding.get_weights()[0])
    for name in ("position_embedding", "embeddings_norm", "pooler"):  # the rest of the backbone is trained
        assert np.abs(getattr(after, name).get_weights()[0] - getattr(before, name).get_weights()[0]).max() > 1e-5


def test_fine_tuning_ends_on_the_moving_average_of_the_weights(pretrained, tmp_path):
    output, _, _ = pretrained
    config = FinetuningConfig(task="sst2", backbone=str(output / "backbone.keras"), sequence_length=32,
                              train_steps=2, epochs=1, train_examples=64, dev_examples=16, trim_padding=True,
                              learning_rate=1e-2)  # steps large enough to tell the average from the last weights
    final = {}
    for momentum in (0.0, 0.5, 0.25):  # the same seed, so the same two steps; only what the run ends on differs
        run = dataclasses.replace(config, ema_momentum=momentum)
        classifier, _ = bert_finetuning_recipe.train(run, tmp_path / str(momentum), verbose=0)
        final[momentum] = [v.numpy() for v in classifier.trainable_variables]
        if momentum:
            averages = [v.numpy() for v in classifier.optimizer._model_variables_moving_average]
            for weight, average in zip(final[momentum], averages):
                np.testing.assert_array_equal(weight, average)
    # Keras's average takes the first step's weights w1 as they are, then m·average + (1 - m)·w2, so both runs
    # must give back the same w1 from the last weights w2 of the run without an average.
    for w2, half, quarter in zip(final[0.0], final[0.5], final[0.25]):
        np.testing.assert_allclose((half - 0.5 * w2) / 0.5, (quarter - 0.75 * w2) / 0.25, atol=2e-5)
    moved = [np.abs(half - w2).max() for w2, half in zip(final[0.0], final[0.5])]
    assert max(moved) > 1e-3  # the average is not the last step's weights
    with pytest.raises(ValueError, match="ema_momentum=1.0 must be below 1.0"):
        bert_finetuning_recipe.train(dataclasses.replace(config, ema_momentum=1.0), tmp_path / "bad", verbose=0)
    assert not (tmp_path / "bad").exists()  # refused before the run folder is made


class _FixedLogits:
    def __init__(self, logits):
        self.logits = np.asarray(logits, "float32")

    def predict(self, dataset, verbose=0):
        return self.logits


def test_dev_scores_accuracy_and_positive_class_f1():
    labels = [1, 1, 0, 0, 1]
    logits = [[0, 1], [1, 0], [0, 1], [1, 0], [0, 1]]  # predictions 1, 0, 1, 0, 1: TP 2, FP 1, FN 1
    assert dev_scores(_FixedLogits(logits), None, labels) == {"accuracy": 0.6, "f1": round(4 / 6, 4)}
    assert dev_scores(_FixedLogits([[1, 0]] * 3), None, [0, 0, 0]) == {"accuracy": 1.0, "f1": 0.0}


def test_pretraining_continues_from_a_checkpoint(pretrained, tmp_path):
    output, history, _ = pretrained
    config = dataclasses.replace(CONFIG, train_steps=2, steps_per_epoch=2, learning_rate=1e-9,
                                 initial_weights=str(output / "checkpoints" / "epoch_003.weights.h5"))
    _, continued, _ = bert_pretraining_recipe.train(
        config, tmp_path, verbose=0, train_documents=lambda: ARTICLES[2:], validation_documents=lambda: ARTICLES[:2]
    )
    # Two steps at a learning rate of 1e-9 leave the weights where the first run ended.
    assert continued.history["val_mlm_loss"][0] == pytest.approx(history["val_mlm_loss"][-1], abs=1e-3)
