"""Training helpers around Keras `fit`: strategy, losses, metrics and schedules."""

from kzoo.train.distribution import strategy
from kzoo.train.losses import MaskedAccuracy, MaskedCrossEntropy
from kzoo.train.schedules import TransformerSchedule
