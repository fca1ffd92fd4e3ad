import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fixed_seed_and_policy():
    """Every test starts from the same seed and the float32 policy, and leaves the global policy as it found it."""
    keras.utils.set_random_seed(1337)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)
