"""Decoding a trained Transformer: greedy, sampling and beam search, all over a key/value cache."""

from kzoo.decoding.beam_search import beam_search
from kzoo.decoding.generate import generate, greedy_reference
from kzoo.decoding.samplers import greedy, sampler
from kzoo.decoding.sub_batches import decode_in_sub_batches, sub_batch_sizes
