"""Sentences or sentence pairs to BERT inputs, `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, in fine-tuning batches made
by kzoo's one BERT text pipeline (`kzoo.text.BertPreprocessor`), for a checkpoint's vocabulary or kzoo's own."""

import tensorflow as tf


def preprocessed_dataset(texts, labels, preprocessor, batch_size, second_texts=None, shuffle=False, seed=0,
                         drop_remainder=False, trim_padding=True, group_by_length=False):
    """A `tf.data.Dataset` of ({"token_ids", "segment_ids", "padding_mask"}, labels) batches made by a preprocessor.

    Each batch of strings goes through `preprocessor(texts)` or `preprocessor(texts, second_texts)` (a
    `kzoo.text.BertPreprocessor`, with a checkpoint's vocabulary or kzoo's own) inside the pipeline. With
    `trim_padding`, every batch is cut to its longest example ("dynamic padding"): the columns cut hold only
    padding, which the encoder masks out, so the model's outputs are unchanged while short sentences cost a fraction
    of `sequence_length` (SST-2 batches average about 40 of 64 positions). With `group_by_length` as well, each
    batch holds examples of the same or nearly the same length, so almost nothing is padding: the shuffled examples
    are tokenized `LENGTH_GROUP_BATCHES` batches at a time, sorted by their number of tokens, cut into batches, and
    those batches shuffled again (SST-2 batches then average 13.8 positions for 13.3 real tokens per example). Every
    example is still seen once per pass; only which examples share a batch changes.

    Args:
        texts: list of str. The first (or only) segment of each example.
        labels: list of int. Class ids.
        preprocessor: callable mapping a batch of strings (and optionally a second batch) to the three int32
            (batch, sequence_length) features.
        batch_size: int.
        second_texts: list of str, or None. The second segment of each example, for sentence-pair tasks.
        shuffle: bool. Shuffle the examples, in a new order every epoch. Defaults to False.
        seed: int. Shuffling seed. Defaults to 0.
        drop_remainder: bool. Drop the last batch if it is smaller than `batch_size`. Defaults to False.
        trim_padding: bool. Cut each batch to its longest example. Defaults to True.
        group_by_length: bool. Batch examples of similar length together; needs `shuffle` (the dev split keeps its
            order, so predictions line up with labels). Defaults to False.

    Example:
    ```python
    preprocessor = kzoo.text.BertPreprocessor(kzoo.data.shipped_file("wikitext2/vocab.txt"), sequence_length=64)
    sst2 = kzoo.data.glue("sst2", "dev")
    batches = kzoo.text.preprocessed_dataset(sst2.texts, sst2.labels, preprocessor, batch_size=32)
    features, labels = next(iter(batches))
    assert features["token_ids"].shape[0] == 32 and features["token_ids"].shape[1] <= 64  # cut to the longest
    ```
    """
    segments = _segments(texts, labels, second_texts)

    def preprocess(batch_segments, batch_labels):
        features = preprocessor(*batch_segments)
        # The batch size is static where the batching makes one (drop_remainder): accelerators compile for it.
        return {name: tf.ensure_shape(tf.cast(value, tf.int32), [batch_labels.shape[0], *value.shape[1:]])
                for name, value in features.items()}, batch_labels

    return _batches(segments, labels, preprocess, batch_size, shuffle, seed, drop_remainder, trim_padding,
                    group_by_length)


def trim_to_longest(features):
    """Cut BERT features (batch, sequence_length) to the batch's longest example, found from `padding_mask` (one
    position for an empty batch, so that a [CLS] position exists).

    Example:
    ```python
    from kzoo.text.classification_batches import trim_to_longest

    features = {"token_ids": tf.constant([[2, 7, 3, 0, 0], [2, 3, 0, 0, 0]]),
                "padding_mask": tf.constant([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])}
    trim_to_longest(features)["token_ids"]  # [[2, 7, 3], [2, 3, 0]]
    ```
    """
    length = tf.maximum(tf.reduce_max(tf.reduce_sum(tf.cast(features["padding_mask"], tf.int32), axis=1)), 1)
    return {name: value[:, :length] for name, value in features.items()}


def _segments(texts, labels, second_texts):
    """(texts,) or (texts, second_texts), after checking that every column has one entry per example."""
    for name, column in (("labels", labels), ("second_texts", second_texts)):
        if column is not None and len(column) != len(texts):
            raise ValueError(f"{name} has {len(column)} entries but texts has {len(texts)}: they must align.")
    return (texts,) if second_texts is None else (texts, second_texts)


LENGTH_GROUP_BATCHES = 64  # group_by_length sorts this many batches of shuffled examples at a time


def _batches(segments, labels, featurize, batch_size, shuffle, seed, drop_remainder, trim_padding, group_by_length):
    """The examples as batches of `featurize(batch_segments, batch_labels)` -> (features, labels), shuffled, grouped
    by length and trimmed as asked."""
    if group_by_length and not shuffle:
        raise ValueError("group_by_length=True reorders examples, so it needs shuffle=True (a training split); "
                         "evaluate without it so that predictions stay in the labels' order.")
    dataset = tf.data.Dataset.from_tensor_slices((segments, tf.constant(labels, tf.int32)))
    if shuffle:
        dataset = dataset.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
    if group_by_length:
        dataset = dataset.batch(batch_size * LENGTH_GROUP_BATCHES)
        dataset = dataset.map(featurize, num_parallel_calls=tf.data.AUTOTUNE).map(_sort_by_length).unbatch()
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
        dataset = dataset.shuffle(LENGTH_GROUP_BATCHES, seed=seed, reshuffle_each_iteration=True)
    else:
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
        dataset = dataset.map(featurize, num_parallel_calls=tf.data.AUTOTUNE)
    if trim_padding:
        dataset = dataset.map(lambda features, batch_labels: (trim_to_longest(features), batch_labels))
    return dataset.prefetch(tf.data.AUTOTUNE)


def _sort_by_length(window_features, window_labels):
    """A window of featurized examples sorted by their number of tokens (`padding_mask`), ties in their given order."""
    order = tf.argsort(tf.reduce_sum(tf.cast(window_features["padding_mask"], tf.int32), axis=1), stable=True)
    return {name: tf.gather(value, order) for name, value in window_features.items()}, tf.gather(window_labels, order)
