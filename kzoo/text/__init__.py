"""Text to ids and back, as TensorFlow ops that can live inside an exported graph."""

from kzoo.text.subword_tokenizer import END, PAD, START, UNKNOWN, SubwordTokenizer
from kzoo.text.translation_batches import encode_pairs, translation_batches
