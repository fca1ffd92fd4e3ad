"""kzoo: the Transformer and BERT from first principles, as Keras 3 layers."""

__version__ = "0.1.0"

from kzoo import layers, models, train
from kzoo.models import (
    Bert,
    Transformer,
    bert_base,
    bert_large,
    bert_medium,
    bert_mini,
    bert_small,
    bert_tiny,
    transformer_base,
    transformer_big,
    transformer_small,
)
