"""Training helpers around Keras `fit`: the distribution strategy for the machine."""

from kzoo.train.distribution import strategy
