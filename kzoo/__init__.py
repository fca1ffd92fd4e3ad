"""kzoo: the Transformer and BERT from first principles, as Keras 3 layers."""

__version__ = "0.1.0"

from kzoo import layers, models, train
from kzoo.models import Transformer, transformer_base, transformer_big, transformer_small
