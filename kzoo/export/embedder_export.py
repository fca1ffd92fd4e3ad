"""Export a BERT backbone as a sentence embedder: raw text in, one float32 vector per text out."""

import tensorflow as tf

from kzoo.export.classifier_export import checked_texts, text_inputs
from kzoo.export.saved_model_writer import write_saved_model
from kzoo.models.bert_pretrained import check_fits
from kzoo.models.bert_sentence_embedder import BertSentenceEmbedder
from kzoo.text.classification_batches import trim_to_longest


def sentence_embedding(backbone, features, pooling="mean", normalize=True):
    """One float32 vector per text from a `Bert` backbone on `features`: `kzoo.models.BertSentenceEmbedder`'s
    output ("mean", "cls" or "pooled"; `normalize` to unit length), in inference mode.

    Example:
    ```python
    backbone = kzoo.models.Bert(vocabulary_size=9, num_layers=1, hidden_dim=8, num_heads=2, max_sequence_length=8)
    features = {"token_ids": np.array([[2, 5, 6, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
                "padding_mask": np.ones((1, 4), "int32")}
    vector = kzoo.export.sentence_embedding(backbone, features)
    assert abs(float(tf.norm(vector[0])) - 1.0) < 1e-5
    ```
    """
    return BertSentenceEmbedder(backbone, pooling, normalize)(features, training=False)


def export_embedder(backbone, preprocessor, base_dir, version=None, pooling="mean", normalize=True):
    """Write `backbone` with its tokenizer as a sentence embedder to `base_dir/<version>/`; returns that path.

    `serving_default` takes `text` (tf.string [batch]) and returns `embedding` (float32 [batch, hidden_dim]), made
    by `kzoo.models.BertSentenceEmbedder` with `pooling` and `normalize` from the preprocessed, padding-trimmed
    batch. A preprocessor whose rows are longer than the backbone's positions is refused here, before any work.

    Example:
    ```python
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat"]
    backbone = kzoo.models.Bert(vocabulary_size=7, num_layers=1, hidden_dim=8, num_heads=2, max_sequence_length=8)
    path = kzoo.export.export_embedder(backbone, kzoo.text.BertPreprocessor(vocabulary, 8), "embedder")
    served = tf.saved_model.load(str(path)).signatures["serving_default"]
    assert served(text=tf.constant(["a cat"]))["embedding"].shape == (1, 8)
    ```
    """
    check_fits(backbone, preprocessor)
    embedder = BertSentenceEmbedder(backbone, pooling, normalize)

    @tf.function(input_signature=text_inputs(pair=False))
    def serve(text):
        features = trim_to_longest(preprocessor(*checked_texts(text)))
        return {"embedding": embedder(features, training=False)}

    return write_saved_model(base_dir, version, serve, [embedder])
