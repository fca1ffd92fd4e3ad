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


# `make test` runs the suite in two processes that take whole files from one queue (xdist's --dist loadfile), in the
# order collected. A long file taken last leaves the other process idle while it finishes, so the files that take
# longest (as `make test`'s --durations showed) are queued first; the rest keep their order.
LONGEST_FIRST = (
    "tests/recipes/test_notebooks.py",
    "tests/train/test_bert_recipes.py",
    "tests/train/test_fault_tolerance.py",
    "tests/test_docstrings.py",
    "tests/test_install.py",
    "tests/models/test_bert_text_classifier.py",
    "tests/test_readme.py",
    "tests/models/test_bert_heads.py",  # with test_transformer and test_properties, the JAX pass's longest files
    "tests/text/test_classification_batches.py",
    "tests/models/test_bert_text_question_answerer.py",
    "tests/models/test_bert_sentence_embedder.py",
    "tests/test_backends.py",
    "tests/train/test_own_backbone_export.py",
    "tests/models/test_transformer.py",
    "tests/layers/test_properties.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    root = config.rootpath

    def key(item):
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else str(item.path)
        return rank.get(path, len(rank))

    items.sort(key=key)  # stable: within a rank, the collected order
