"""BertClassifier on raw text: made from a checkpoint with its preprocessor, fit/evaluate/predict on strings, pairs
and tf.data of strings, label names, and a .keras file that predicts the same in a fresh process."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.models import BertClassifier
from tests.models.tiny_text_checkpoint import POSITIONS, in_a_fresh_process, tiny_checkpoint

# The text side of these tasks is kzoo.text's TensorFlow pipeline: `make test` runs them under TensorFlow only
# (`make test-slow` under JAX too), so the JAX pass stays on the backend-free core.
pytestmark = pytest.mark.text_pipeline

TEXTS = ["the film is good", "a dull movie", "great film !", "bad , bad movie", "a fine cat", "the dog sat"]
SECOND = ["a movie", "the cat", "good", "dull", "fine film", "bad dog"]
LABELS = [1, 0, 1, 0, 1, 0]
NAMES = ["negative", "positive"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("text") / "tiny_uncased")


@pytest.fixture(scope="module")
def classifier(checkpoint):
    keras.utils.set_random_seed(7)
    model = BertClassifier.from_checkpoint(checkpoint, num_classes=2, sequence_length=16, label_names=NAMES,
                                           dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    return model


def test_from_checkpoint_attaches_the_checkpoints_preprocessor(classifier):
    preprocessor = classifier.preprocessor
    assert preprocessor.sequence_length == 16 and preprocessor.lowercase
    np.testing.assert_array_equal(preprocessor(["The Cat sat"])["token_ids"][0, :6], [2, 5, 18, 20, 3, 0])


def test_predict_on_text_equals_predict_on_its_features(classifier):
    from_text = classifier.predict(TEXTS, verbose=0)
    from_features = classifier.predict(classifier.preprocessor(TEXTS), verbose=0)
    np.testing.assert_allclose(from_text, from_features, atol=1e-6)
    assert from_text.shape == (6, 2) and np.ptp(from_text[:, 0]) > 0  # the texts give different logits
    pairs = classifier.predict((TEXTS, SECOND), batch_size=4, verbose=0)
    np.testing.assert_allclose(pairs, classifier.predict(classifier.preprocessor(TEXTS, SECOND), verbose=0),
                               atol=1e-6)
    assert not np.allclose(pairs, from_text)  # the second texts count
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS, SECOND)).batch(4)
    np.testing.assert_allclose(classifier.predict(dataset, verbose=0), pairs, atol=1e-6)


def test_fit_and_evaluate_on_strings(classifier):
    before = [weight.copy() for weight in classifier.get_weights()]
    history = classifier.fit(TEXTS, LABELS, batch_size=3, epochs=3, verbose=0, validation_data=(TEXTS, LABELS))
    assert classifier.optimizer.iterations == 6  # 2 batches of 3 texts, 3 epochs
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert any(not np.allclose(a, b) for a, b in zip(before, classifier.get_weights()))
    logits = classifier.predict(TEXTS, verbose=0)
    log_probabilities = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected_loss = -np.mean(log_probabilities[np.arange(6), LABELS])
    expected_accuracy = np.mean(np.argmax(logits, -1) == LABELS)
    scores = classifier.evaluate(tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(4), verbose=0,
                                 return_dict=True)
    assert scores["loss"] == pytest.approx(expected_loss, rel=1e-4)
    assert scores["accuracy"] == pytest.approx(expected_accuracy)
    assert history.history["val_loss"][-1] == pytest.approx(expected_loss, rel=1e-4)
    assert classifier.predict_labels(TEXTS) == [NAMES[i] for i in np.argmax(logits, -1)]
    assert classifier.predict_labels(TEXTS[0]) == NAMES[np.argmax(logits[0])]
    pair_logits = classifier.predict((TEXTS, SECOND), verbose=0)
    pair_scores = classifier.evaluate((TEXTS, SECOND), LABELS, verbose=0, return_dict=True)
    assert pair_scores["accuracy"] == pytest.approx(np.mean(np.argmax(pair_logits, -1) == LABELS))


def test_a_saved_classifier_predicts_the_same_in_a_fresh_process(classifier, tmp_path):
    path = tmp_path / "classifier.keras"
    classifier.save(path)
    logits, names = in_a_fresh_process(
        path, f"[model.predict({TEXTS!r}, verbose=0).tolist(), model.predict_labels({TEXTS!r})]")
    np.testing.assert_allclose(logits, classifier.predict(TEXTS, verbose=0), atol=1e-5)
    assert names == classifier.predict_labels(TEXTS)


def test_text_without_a_preprocessor_is_a_clear_error(classifier):
    bare = BertClassifier(classifier.backbone, num_classes=2)
    with pytest.raises(ValueError, match="has no preprocessor, so it takes token ids"):
        bare.predict(TEXTS)
    with pytest.raises(ValueError, match="has no label_names"):
        bare.predict_labels(classifier.preprocessor(TEXTS))


def test_bad_arguments_are_refused_before_any_work(checkpoint):
    with pytest.raises(ValueError, match=f"sequence_length=64 is longer than the {POSITIONS} positions"):
        BertClassifier.from_checkpoint(checkpoint, num_classes=2, sequence_length=64)
    with pytest.raises(ValueError, match="has 3 names for num_classes=2"):
        BertClassifier.from_checkpoint(checkpoint, num_classes=2, sequence_length=16, label_names=["a", "b", "c"])
