"""Export a BERT backbone as a sentence embedder: raw text in, one float32 vector per text out."""

import tensorflow as tf

from kzoo.export.classifier_export import checked_texts, text_inputs
from kzoo.export.saved_model_writer import write_saved_model
from kzoo.layers.mean_pooling import MeanPooling
from kzoo.text.classification_batches import trim_to_longest

POOLINGS = ("mean", "cls", "pooled")


def sentence_embedding(backbone, features, pooling="mean", normalize=True):
    """One float32 vector per text from a `Bert` backbone's outputs on `features`.

    "mean" averages the last layer over the real tokens ([CLS] and [SEP] included, padding excluded), as
    sentence-transformers does for all-MiniLM-L6-v2; "cls" takes the [CLS] position; "pooled" the tanh pooler's
    output. `normalize` divides each vector by its L2 norm (all-MiniLM-L6-v2 does), so a dot product is the cosine.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling={pooling!r} is not a pooling; use one of {POOLINGS}.")
    outputs = backbone(features, training=False)
    if pooling == "pooled":
        embedding = tf.cast(outputs["pooled_output"], tf.float32)
    elif pooling == "cls":
        embedding = tf.cast(outputs["sequence_output"][:, 0], tf.float32)
    else:
        embedding = MeanPooling()(tf.cast(outputs["sequence_output"], tf.float32), features["padding_mask"])
    return tf.math.l2_normalize(embedding, axis=-1, epsilon=1e-24) if normalize else embedding


def export_embedder(backbone, preprocessor, base_dir, version=None, pooling="mean", normalize=True):
    """Write `backbone` with its tokenizer as a sentence embedder to `base_dir/<version>/`; returns that path.

    `serving_default` takes `text` (tf.string [batch]) and returns `embedding` (float32 [batch, hidden_dim]), made
    by `sentence_embedding` with `pooling` and `normalize` from the preprocessed, padding-trimmed batch.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling={pooling!r} is not a pooling; use one of {POOLINGS}.")

    @tf.function(input_signature=text_inputs(pair=False))
    def serve(text):
        features = trim_to_longest(preprocessor(*checked_texts(text)))
        return {"embedding": sentence_embedding(backbone, features, pooling, normalize)}

    return write_saved_model(base_dir, version, serve, [backbone])
