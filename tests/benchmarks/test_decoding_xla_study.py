"""benchmarks/decoding_xla_study.py: the fixed-shape beam search (plain and compiled) finds kzoo's beam search's
hypotheses, and the script runs end to end."""

import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.decoding import beam_search
from kzoo.models import Transformer
from tests.benchmarks.test_translation_study_benchmarks import run
from tests.train.worker_processes import REPOSITORY

sys.path.insert(0, str(REPOSITORY / "benchmarks"))
from decoding_xla_study import fixed_beam_search  # noqa: E402


@pytest.mark.slow  # XLA compiles; `make test-slow` runs it
@pytest.mark.parametrize("jit", [False, True])
def test_fixed_shape_beam_search_gives_beam_search_ids(jit):
    keras.utils.set_random_seed(3)
    model = Transformer(40, num_encoder_layers=1, num_decoder_layers=2, hidden_dim=16, num_heads=2,
                        intermediate_dim=32)
    ids = tf.constant([[5, 6, 7, 8, 2, 0, 0, 0], [9, 2, 0, 0, 0, 0, 0, 0], [11, 12, 13, 2, 0, 0, 0, 0]])
    limits = tf.constant([9, 4, 7])  # per-sentence limits, as Translator sets them
    expected = beam_search(model, ids, limits, beam_size=3, length_penalty=0.6).numpy()
    fixed = tf.function(lambda i, lim: fixed_beam_search(model, i, lim, 16, beam_size=3, length_penalty=0.6),
                        jit_compile=jit)
    got, steps = fixed(ids, limits)
    got = got.numpy()
    np.testing.assert_array_equal(got[:, : expected.shape[1]], expected)
    assert not got[:, expected.shape[1]:].any() and int(steps) <= 9  # padding only past the longest limit


@pytest.mark.slow
def test_the_xla_study_times_three_decoders_with_equal_ids():
    rows = run("decoding_xla_study.py", "--batch-sizes", "4", "--batches", "2", "--rounds", "1")
    timed = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows if row.startswith("| 4 |")]
    assert [cells[1] for cells in timed[:3]] == ["dynamic (kzoo.decoding.beam_search)", "fixed shapes",
                                                "fixed shapes, XLA"]
    for cells in timed[:3]:
        assert cells[5] == "8/8" and float(cells[2]) > 0  # every decoder found the dynamic one's ids
