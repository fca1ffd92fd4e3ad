"""Raw text into a task model's `fit`, `evaluate` and `predict`: strings, pairs of strings and `tf.data` of strings
become batches of the features the model takes, made by the model's preprocessor inside the `tf.data` pipeline.

Keras's own conventions hold: `x` with `y` and `sample_weight`, or a batched `tf.data.Dataset` of `x`,
`(x, y)` or `(x, y, sample_weight)`. A text `x` is a string, a list, numpy array or string tensor of strings, or a
pair of texts as a tuple `(texts, second_texts)`; in a dataset, an element of two string tensors is such a pair
(labels are never strings), so a labelled pair is `((texts, second_texts), labels)`.
"""

import keras
import numpy as np
import tensorflow as tf

DEFAULT_BATCH_SIZE = 32  # Keras's own default for arrays


def _strings(value):
    """Whether `value` is one string or a batch of strings (list, tuple of str, numpy array, string tensor)."""
    if isinstance(value, (str, bytes)):
        return True
    if isinstance(value, (tf.Tensor, tf.RaggedTensor, tf.TensorSpec, tf.RaggedTensorSpec)):
        return value.dtype == tf.string
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "US" or (value.dtype.kind == "O" and value.size > 0
                                              and all(isinstance(v, (str, bytes)) for v in value.flat))
    if isinstance(value, list):
        return len(value) > 0 and all(isinstance(v, (str, bytes)) for v in value)
    return False


def is_text(x):
    """Whether `x` is raw text for a preprocessor: strings, or a pair of them as a tuple `(texts, second_texts)`.

    Example:
    ```python
    from kzoo.text.task_inputs import is_text

    assert is_text(["a fine film", "dull"]) and is_text((["a cat"], ["a dog"]))
    assert not is_text({"token_ids": np.zeros((1, 4), "int32")})
    ```
    """
    if isinstance(x, tuple) and len(x) == 2 and not isinstance(x[0], tuple):
        return _strings(x[0]) and _strings(x[1])
    return _strings(x)


def _as_batch(x):
    """Text as a string tensor of rank 1 (a single string becomes a batch of one), or a pair of them."""
    if isinstance(x, tuple):
        return tuple(_as_batch(part) for part in x)
    x = tf.convert_to_tensor(x, tf.string) if not isinstance(x, tf.Tensor) else x
    return tf.reshape(x, [-1]) if x.shape.rank == 0 else x


def _unpack(element):
    """(x, y, sample_weight) of a dataset element given as a tuple of its components."""
    if len(element) == 2 and all(_strings(part) for part in element):
        return tuple(element), None, None  # a pair of texts
    return element[0], element[1] if len(element) > 1 else None, element[2] if len(element) > 2 else None


def _arrays(value):
    """Labels or weights as numpy arrays: an array, or a dict of them (one per output)."""
    if isinstance(value, dict):
        return {name: np.asarray(part) for name, part in value.items()}
    return np.asarray(value)


def _dataset_is_text(dataset):
    spec = dataset.element_spec
    if not isinstance(spec, tuple):
        return _strings(spec)
    if len(spec) == 2 and all(_strings(part) for part in spec):
        return True
    return is_text(spec[0])


def text_dataset(preprocessor, x, y=None, sample_weight=None, batch_size=None, shuffle=False, trim_padding=False):
    """Batches of `(features, y, sample_weight)` from raw text, or None when `x` is not text (the caller then passes
    `x` to Keras as it is).

    Args:
        preprocessor: callable `(texts)` or `(texts, second_texts)` to the features dict, e.g.
            `kzoo.text.BertPreprocessor`.
        x: text (see the module docstring), or a batched `tf.data.Dataset` whose elements hold text.
        y, sample_weight: arrays (or dicts of arrays) with one entry per text; not with a dataset.
        batch_size: int. Texts per batch; defaults to 32. Not with a dataset, which is batched already.
        shuffle: bool. Shuffle the texts, in a new order every epoch (not a dataset's). Defaults to False.
        trim_padding: bool. Cut each batch to its longest example (`trim_to_longest`); only for models whose output
            does not depend on the number of positions. Defaults to False.

    Example:
    ```python
    from kzoo.text.task_inputs import text_dataset

    preprocessor = kzoo.text.BertPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat"], 8)
    [(features, labels)] = text_dataset(preprocessor, ["a cat", "a dog"], [1, 0], batch_size=2)
    features["token_ids"]  # [[2, 5, 6, 3, 0, 0, 0, 0], [2, 5, 1, 3, 0, 0, 0, 0]]
    ```
    """
    from kzoo.text.classification_batches import trim_to_longest

    def preprocess(*element):
        texts, labels, weights = _unpack(element)
        features = preprocessor(*texts) if isinstance(texts, tuple) else preprocessor(texts)
        features = trim_to_longest(features) if trim_padding else features
        return keras.utils.pack_x_y_sample_weight(features, labels, weights)

    if isinstance(x, tf.data.Dataset):
        if not _dataset_is_text(x):
            return None
        for name, value in (("y", y), ("sample_weight", sample_weight), ("batch_size", batch_size)):
            if value is not None:
                raise ValueError(f"x is a tf.data.Dataset, so {name} must be None: put it in the dataset's elements.")
        return x.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    if not is_text(x):
        return None
    x = _as_batch(x)
    examples = (x if isinstance(x, tuple) else (x,))[0].shape[0]
    if isinstance(x, tuple) and x[1].shape[0] != examples:
        raise ValueError(f"texts has {examples} entries and second_texts {x[1].shape[0]}: pass one second text for "
                         "each text.")
    if y is None and sample_weight is not None:
        raise ValueError("sample_weight was given without y: pass the labels too.")
    components = (x,) + tuple(_arrays(v) for v in (y, sample_weight) if v is not None)
    dataset = tf.data.Dataset.from_tensor_slices(components)
    if shuffle:
        dataset = dataset.shuffle(examples, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size or DEFAULT_BATCH_SIZE)
    return dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def word_positions(preprocessor, texts):
    """The words of each text, as BERT's basic tokenizer cuts them, each with the position of its first piece in the
    preprocessor's row (`[CLS]` is position 0); words cut off by truncation are left out.

    Example:
    ```python
    from kzoo.text.task_inputs import word_positions

    preprocessor = kzoo.text.BertPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cat", "##s", "sat"], 5)
    word_positions(preprocessor, ["Cats sat down"])  # [[("cats", 1), ("sat", 3)]]: "down" does not fit
    ```
    """
    words, pieces = preprocessor.word_pieces(_as_batch(texts))
    room = preprocessor.sequence_length - 2  # [CLS] and [SEP]
    positions = []
    for row_words, lengths in zip(words.to_list(), pieces.row_lengths(axis=2).to_list()):
        offsets = np.cumsum([0, *lengths[:-1]]) if lengths else []
        positions.append([(word.decode("utf-8"), 1 + int(offset))
                          for word, offset in zip(row_words, offsets) if offset < room])
    return positions


def word_label_dataset(preprocessor, texts, word_labels, ignore_label, batch_size=None, shuffle=False):
    """Batches of (features, token labels) for a token classifier from texts and one label per word: each word's
    first piece carries its label, every other position (its other pieces, [CLS], [SEP], padding) `ignore_label`.
    Texts are tokenized once, here, rather than inside the pipeline.

    Example:
    ```python
    from kzoo.text.task_inputs import word_label_dataset

    preprocessor = kzoo.text.BertPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cat", "##s", "sat"], 6)
    [(features, labels)] = word_label_dataset(preprocessor, ["Cats sat"], [[1, 0]], ignore_label=-100)
    labels  # [[-100, 1, -100, 0, -100, -100]]
    ```
    """
    if isinstance(texts, str) or not is_text(texts) or isinstance(texts, tuple):
        raise ValueError("a token classifier trains on a list of texts with one list of word labels each.")
    positions = word_positions(preprocessor, texts)
    words = [words for words in preprocessor.word_pieces(_as_batch(texts))[0].to_list()]
    if len(word_labels) != len(texts):
        raise ValueError(f"{len(word_labels)} label lists for {len(texts)} texts: give one list per text.")
    labels = np.full((len(texts), preprocessor.sequence_length), ignore_label, np.int32)
    for row, (kept, row_words, row_labels) in enumerate(zip(positions, words, word_labels)):
        if len(row_labels) != len(row_words):
            raise ValueError(
                f"text {row} has {len(row_words)} words ({[w.decode('utf-8') for w in row_words]}) but "
                f"{len(row_labels)} labels: give one label per word, as BERT's basic tokenizer cuts the text "
                "(punctuation is a word of its own)."
            )
        for (_, position), label in zip(kept, row_labels):
            labels[row, position] = label
    features = {name: value.numpy() for name, value in preprocessor(list(texts)).items()}
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    if shuffle:
        dataset = dataset.shuffle(len(texts), reshuffle_each_iteration=True)
    return dataset.batch(batch_size or DEFAULT_BATCH_SIZE).prefetch(tf.data.AUTOTUNE)
