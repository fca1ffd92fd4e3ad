"""Tiny exports of every kind kzoo serves, built once per test session: classifier, pair classifier, embedder,
translator."""

import keras
import pytest

from kzoo.data import multi30k
from kzoo.export import export_classifier, export_embedder, export_translator
from kzoo.models import BertClassifier, Transformer
from kzoo.text import SubwordTokenizer
from kzoo.text.bert_preprocessor import BertPreprocessor
from kzoo.translator import Translator
from tests.serving.tiny_exports import SEQUENCE_LENGTH, VOCABULARY, tiny_bert


@pytest.fixture(scope="session")
def preprocessor():
    return BertPreprocessor(VOCABULARY, sequence_length=SEQUENCE_LENGTH)


@pytest.fixture(scope="session")
def exports(tmp_path_factory, preprocessor):
    """{kind: (path, the Python objects it was exported from)}."""
    root = tmp_path_factory.mktemp("saved_models")
    classifier = BertClassifier(tiny_bert(1), num_classes=2)
    pair_classifier = BertClassifier(tiny_bert(2), num_classes=3)
    embedder = tiny_bert(3)
    english, german = multi30k("val")
    tokenizer = SubwordTokenizer.train(english + german, vocabulary_size=600)
    keras.utils.set_random_seed(4)
    transformer = Transformer(tokenizer.vocabulary_size, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=32,
                              num_heads=2, intermediate_dim=64, share_embeddings=True)
    translator = Translator(transformer, tokenizer, method="beam", beam_size=2, max_source_length=16)
    return {
        "classifier": (export_classifier(classifier, preprocessor, ["negative", "positive"], root / "classifier"),
                       classifier),
        "pair_classifier": (export_classifier(pair_classifier, preprocessor, ["entailment", "neutral", "contradiction"],
                                              root / "pair_classifier", pair=True), pair_classifier),
        "embedder": (export_embedder(embedder, preprocessor, root / "embedder"), embedder),
        "translator": (export_translator(translator, root / "translator"), translator),
    }
