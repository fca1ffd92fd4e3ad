"""The tiny, untrained translator the translator tests build: a 500-piece vocabulary learned from Multi30k val and
a 1+1-block Transformer of width 16, with the weights of `seed`."""

import keras

from kzoo.data import multi30k
from kzoo.models import Transformer
from kzoo.text import SubwordTokenizer
from kzoo.translator import Translator


def tiny_translator(seed, **options):
    """A `Translator` (its `options`: method, beam size, limits) over that model and vocabulary."""
    english, german = multi30k("val")
    tokenizer = SubwordTokenizer.train(english[:400] + german[:400], vocabulary_size=500)
    keras.utils.set_random_seed(seed)
    model = Transformer(tokenizer.vocabulary_size, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16,
                        num_heads=2, intermediate_dim=32, share_embeddings=True)
    return Translator(model, tokenizer, **options)
