"""BertTokenClassifier on raw text: word labels aligned to first pieces for fit, (word, label) pairs out."""

import keras
import numpy as np
import pytest

from kzoo.models import BertTokenClassifier
from kzoo.text.task_inputs import word_label_dataset, word_positions
from tests.models.tiny_text_checkpoint import VOCABULARY, in_a_fresh_process

# The text side of these tasks is kzoo.text's TensorFlow pipeline: `make test` runs them under TensorFlow only
# (`make test-slow` under JAX too), so the JAX pass stays on the backend-free core.
pytestmark = pytest.mark.text_pipeline

TEXTS = ["Who lives in Paris?", "The cat sat on the mat.", "London is great!"]
WORD_LABELS = [[0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0]]  # 1: a place
NAMES = ["O", "PLACE"]


@pytest.fixture(scope="module")
def tagger():
    # A fresh bert_tiny with the tiny test vocabulary (the preset path of from_checkpoint): the tiny reference
    # checkpoint's random weights give almost the same vector at every position, which a tagger cannot tell apart.
    keras.utils.set_random_seed(3)
    model = BertTokenClassifier.from_checkpoint("bert_tiny", vocabulary=VOCABULARY, sequence_length=12,
                                                num_classes=2, label_names=NAMES, dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    return model


def test_word_labels_go_to_each_words_first_piece(tagger):
    # "paris" is one piece here; "mat." gives two words; a word of unknown letters is one [UNK] piece.
    assert word_positions(tagger.preprocessor, ["Who lives in Paris?"]) == [
        [("who", 1), ("lives", 2), ("in", 3), ("paris", 4), ("?", 5)]]
    [(features, labels)] = word_label_dataset(tagger.preprocessor, TEXTS, WORD_LABELS, -100, batch_size=3)
    np.testing.assert_array_equal(labels[0], [-100, 0, 0, 0, 1, 0] + [-100] * 6)
    np.testing.assert_array_equal(labels[2], [-100, 1, 0, 0, 0] + [-100] * 7)
    assert features["token_ids"].shape == (3, 12)
    with pytest.raises(ValueError, match=r"text 0 has 5 words \(\['who', 'lives', 'in', 'paris', '\?'\]\) but 4"):
        word_label_dataset(tagger.preprocessor, TEXTS[:1], [[0, 0, 0, 1]], -100)


def test_fit_on_word_labels_and_predict_word_labels(tagger):
    history = tagger.fit(TEXTS, WORD_LABELS, batch_size=3, epochs=20, verbose=0)
    assert history.history["loss"][-1] < 0.05 < history.history["loss"][0]
    logits = tagger.predict(TEXTS, verbose=0)
    assert logits.shape == (3, 12, 2)
    labelled = tagger.predict_labels(TEXTS)
    for row, words in enumerate(labelled):
        positions = [position for _, position in word_positions(tagger.preprocessor, [TEXTS[row]])[0]]
        assert [label for _, label in words] == [NAMES[i] for i in logits[row, positions].argmax(-1)]
    assert [label for _, label in tagger.predict_labels(TEXTS[0])] == [NAMES[i] for i in WORD_LABELS[0]]


def test_a_saved_tagger_labels_the_same_words_in_a_fresh_process(tagger, tmp_path):
    tagger.save(tmp_path / "tagger.keras")
    loaded = in_a_fresh_process(tmp_path / "tagger.keras", f"model.predict_labels({TEXTS!r})")
    assert loaded == [[list(pair) for pair in words] for words in tagger.predict_labels(TEXTS)]
