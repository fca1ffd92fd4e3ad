"""The tiny models and texts the serving tests export and serve."""

import keras

from kzoo.models import Bert

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "dog", "runs", "on", "the", "beach", "cafe", "is",
              "great", "film", "dull", ".", "!", "##s", "##ing", "un", "日", "本", "no"]
SEQUENCE_LENGTH = 12
TEXTS = ["A dog runs on the beach.", "", "The café is great!", "dull " * 40, "日本 ☃ 😀 naïve", "unrun dogs"]
PAIRS = ["The film is great.", "a dog", "", "no", "beach " * 30, "Café!"]


def tiny_bert(seed, dtype=None):
    keras.utils.set_random_seed(seed)
    return Bert(vocabulary_size=len(VOCABULARY), num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32,
                max_sequence_length=SEQUENCE_LENGTH, dtype=dtype)
