"""Training helpers around Keras `fit`: strategy, losses, metrics and schedules."""

from kzoo.train.distribution import strategy
from kzoo.train.losses import MaskedAccuracy, MaskedCrossEntropy
from kzoo.train.metrics import SparseF1Score
from kzoo.train.schedules import TransformerSchedule, WarmupLinearDecay
from kzoo.train.callbacks import TimeBudget, average_weights
from kzoo.train.quality import translation_scores
