"""Metrics that kzoo's models compile with: token accuracy over real tokens, and F1 of one class.

Keras and numpy only, so every backend can use them, and the models can name them as defaults without importing
training code.
"""

from kzoo.metrics.masked_accuracy import MaskedAccuracy
from kzoo.metrics.sparse_f1_score import SparseF1Score
