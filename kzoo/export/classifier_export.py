"""Export a fine-tuned BERT classifier as a SavedModel: raw text (or text pairs) in, probabilities and labels out."""

import tensorflow as tf

from kzoo.export.saved_model_writer import write_saved_model
from kzoo.text.classification_batches import trim_to_longest


def text_inputs(pair):
    """The serving signature's string inputs: `text`, and `text_pair` for sentence-pair models.

    Example:
    ```python
    from kzoo.export.classifier_export import text_inputs

    [spec.name for spec in text_inputs(pair=True)]  # ["text", "text_pair"]
    assert text_inputs(pair=False) == [tf.TensorSpec([None], tf.string, name="text")]
    ```
    """
    names = ("text", "text_pair") if pair else ("text",)
    return [tf.TensorSpec([None], tf.string, name=name) for name in names]


def checked_texts(text, text_pair=None):
    """The inputs as 1-D string tensors, refusing other ranks and pairs of unequal length inside the graph.

    Example:
    ```python
    from kzoo.export.classifier_export import checked_texts

    text, text_pair = checked_texts(tf.constant(["a cat", "a dog"]), tf.constant(["it sat", "it ran"]))
    text.numpy().tolist(), text_pair.numpy().tolist()  # ([b"a cat", b"a dog"], [b"it sat", b"it ran"])
    try:
        checked_texts(tf.constant(["a cat", "a dog"]), tf.constant(["it sat"]))
    except tf.errors.InvalidArgumentError as error:
        print(error.message)  # text and text_pair must hold one entry per example each ...
    ```
    """
    text = tf.ensure_shape(text, [None])
    if text_pair is None:
        return text, None
    text_pair = tf.ensure_shape(text_pair, [None])
    same = tf.debugging.assert_equal(tf.size(text), tf.size(text_pair),
                                     message="text and text_pair must hold one entry per example each")
    with tf.control_dependencies([same]):
        return tf.identity(text), tf.identity(text_pair)


def export_classifier(classifier, preprocessor, label_names, base_dir, version=None, pair=False, trim_padding=True):
    """Write `classifier` with its tokenizer to `base_dir/<version>/` and return that path.

    `serving_default` takes `text` (tf.string [batch]), and `text_pair` too when `pair`, and returns
    `probabilities` (float32 [batch, classes], the softmax of the logits, float32 whatever the training policy) and
    `label` (tf.string [batch], the name of the most probable class). Inside the graph: `preprocessor` (e.g.
    `kzoo.text.BertPreprocessor`: tokenization, truncation of overlong texts to its `sequence_length`, packing), each
    batch cut to its longest example (unless `trim_padding=False`: the same outputs, at the cost of the padding),
    the classifier in inference mode.

    Args:
        classifier: a `kzoo.models.BertClassifier` (any Keras model taking the preprocessor's features and giving
            logits [batch, classes]).
        preprocessor: callable `(texts)` or `(texts, second_texts)` to the features dict, made of TensorFlow ops.
        label_names: the class names, in class-id order.
        base_dir: the model's folder, e.g. "saved_models/minilm_sst2"; the version is written inside it.
        version: int, or None for one more than the highest existing version.
        pair: bool. Serve sentence pairs (`text`, `text_pair`).
        trim_padding: bool. Cut each batch to its longest example. Defaults to True.

    Example:
    ```python
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat"]
    backbone = kzoo.models.Bert(vocabulary_size=7, num_layers=1, hidden_dim=8, num_heads=2, max_sequence_length=8)
    classifier = kzoo.models.BertClassifier(backbone, num_classes=2)
    path = kzoo.export.export_classifier(classifier, kzoo.text.BertPreprocessor(vocabulary, 8), ["no", "yes"],
                                         "classifier")
    assert path.name == "1"  # the first version of "classifier"
    served = tf.saved_model.load(str(path)).signatures["serving_default"]
    outputs = served(text=tf.constant(["a cat", "a"]))
    assert outputs["probabilities"].shape == (2, 2) and set(outputs["label"].numpy()) <= {b"no", b"yes"}
    ```
    """
    label_names = [str(name) for name in label_names]
    classes = classifier.output_shape[-1]
    if len(label_names) != classes:
        raise ValueError(f"label_names has {len(label_names)} names but the classifier has {classes} classes; pass "
                         "one name for each class, in class-id order.")

    @tf.function(input_signature=text_inputs(pair))
    def serve(*texts):
        features = preprocessor(*checked_texts(*texts))
        features = trim_to_longest(features) if trim_padding else features
        probabilities = tf.nn.softmax(tf.cast(classifier(features, training=False), tf.float32), axis=-1)
        label = tf.gather(tf.constant(label_names), tf.argmax(probabilities, axis=-1))
        return {"probabilities": probabilities, "label": label}

    return write_saved_model(base_dir, version, serve, [classifier])
