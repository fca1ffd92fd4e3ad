import numpy as np
import pytest
from keras import ops

from kzoo.layers.masks import attention_mask_for, causal_mask, masked_softmax


def test_causal_mask_is_lower_triangular_with_offset():
    np.testing.assert_array_equal(ops.convert_to_numpy(causal_mask(3, 3)), np.tril(np.ones((3, 3), bool)))
    np.testing.assert_array_equal(ops.convert_to_numpy(causal_mask(1, 4, query_offset=2)), [[True, True, True, False]])


def test_attention_mask_combines_padding_explicit_and_causal():
    query = np.zeros((1, 3, 2), "float32")
    padding = np.array([[True, True, False]])
    explicit = np.array([[[True, False, True], [True, True, True], [True, True, True]]])
    mask = ops.convert_to_numpy(attention_mask_for(query, padding, explicit, use_causal_mask=True))
    np.testing.assert_array_equal(mask[0], [[True, False, False], [True, True, False], [True, True, False]])
    assert attention_mask_for(query) is None


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_masked_softmax_is_finite_for_fully_masked_rows(dtype):
    logits = ops.cast(np.array([[60000.0, -3.0, 2.0], [1.0, 2.0, 3.0]]), dtype)
    mask = np.array([[False, False, False], [True, False, True]])
    weights = ops.convert_to_numpy(ops.cast(masked_softmax(logits, mask), "float32"))
    assert np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-2)
    np.testing.assert_allclose(weights[1], [1 / (1 + np.e**2), 0, np.e**2 / (1 + np.e**2)], atol=1e-2)
