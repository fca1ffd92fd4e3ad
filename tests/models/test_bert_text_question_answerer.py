"""BertQuestionAnswerer on raw text: (question, context) pairs in, the best context span out as text."""

import keras
import numpy as np
import pytest

from kzoo.layers.masks import MASKED_LOGIT
from kzoo.models import BertQuestionAnswerer
from tests.models.tiny_text_checkpoint import VOCABULARY, in_a_fresh_process

# The text side of these tasks is kzoo.text's TensorFlow pipeline: `make test` runs them under TensorFlow only
# (`make test-slow` under JAX too), so the JAX pass stays on the backend-free core.
pytestmark = pytest.mark.text_pipeline

QUESTIONS = ["who lives in london?", "where is the cat?"]
CONTEXTS = ["the cat lives in paris.", "the cat sat on the mat in london"]


@pytest.fixture(scope="module")
def reader():
    keras.utils.set_random_seed(5)
    return BertQuestionAnswerer.from_checkpoint("bert_tiny", vocabulary=VOCABULARY, sequence_length=16, dropout=0.0)


def brute_force_answers(reader, max_answer_length):
    """The highest start + end logit over every span of context tokens, found by trying them all."""
    features = reader.preprocessor(QUESTIONS, CONTEXTS)
    logits = reader.predict(features, verbose=0)
    token_ids, segments = np.asarray(features["token_ids"]), np.asarray(features["segment_ids"])
    answers = []
    for row in range(len(QUESTIONS)):
        context = [i for i in range(16) if segments[row, i] == 1 and token_ids[row, i] != 3]
        spans = [(s, e) for s in context for e in context if 0 <= e - s < max_answer_length]
        start, end = max(spans, key=lambda span: logits["start"][row, span[0]] + logits["end"][row, span[1]])
        answers.append(" ".join(VOCABULARY[i] for i in token_ids[row, start:end + 1]).replace(" ##", ""))
    return answers


@pytest.mark.parametrize("max_answer_length", [1, 3])
def test_answers_are_the_best_span_of_the_context(reader, max_answer_length):
    answers = reader.predict_answers(QUESTIONS, CONTEXTS, max_answer_length=max_answer_length)
    assert answers == brute_force_answers(reader, max_answer_length)
    for answer, context in zip(answers, CONTEXTS):
        assert 1 <= len(answer.split()) <= max_answer_length and answer in context
    assert MASKED_LOGIT < -1e3


def test_a_trained_reader_answers_with_the_context_word(reader):
    features = reader.preprocessor(QUESTIONS[:1], CONTEXTS[:1])  # [CLS] who lives in london ? [SEP] the cat ...
    assert reader.preprocessor.id_to_token(int(features["token_ids"][0, 11])) == "paris"
    reader.compile(optimizer=keras.optimizers.Adam(3e-3))
    reader.fit(features, {"start": np.array([11]), "end": np.array([11])}, epochs=20, verbose=0)
    assert reader.predict_answers(QUESTIONS[0], CONTEXTS[0]) == "paris"
    with pytest.raises(ValueError, match="has no preprocessor"):
        BertQuestionAnswerer(reader.backbone).predict_answers(QUESTIONS, CONTEXTS)


def test_a_saved_reader_answers_the_same_in_a_fresh_process(reader, tmp_path):
    reader.save(tmp_path / "reader.keras")
    expression = f"model.predict_answers({QUESTIONS!r}, {CONTEXTS!r})"
    assert in_a_fresh_process(tmp_path / "reader.keras", expression) == reader.predict_answers(QUESTIONS, CONTEXTS)
