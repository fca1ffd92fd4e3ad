"""Text to ids and back, as TensorFlow ops that can live inside an exported graph."""

from kzoo.text.subword_tokenizer import END, PAD, START, UNKNOWN, SubwordTokenizer
from kzoo.text.translation_batches import encode_pairs, translation_batches
from kzoo.text.classification_batches import classification_dataset, preprocessed_dataset
from kzoo.text.sentences import split_sentences
from kzoo.text.wordpiece import learn_wordpiece_vocabulary, load_vocabulary, save_vocabulary, wordpiece_tokenizer
from kzoo.text.pretraining_data import pretraining_dataset
from kzoo.text.bert_preprocessor import BertPreprocessor
