"""Decoding a trained Transformer: greedy, sampling and beam search, all over a key/value cache."""

from kzoo.decoding.beam_search import beam_search
from kzoo.decoding.generate import generate, greedy_reference
from kzoo.decoding.samplers import greedy, sampler
