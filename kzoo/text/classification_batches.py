"""Sentences or sentence pairs to fixed-length BERT inputs, `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, in batches."""

import keras_hub
import tensorflow as tf


def classification_dataset(texts, labels, tokenizer, sequence_length, batch_size, second_texts=None, shuffle=False,
                           seed=0, drop_remainder=False, trim_padding=False, group_by_length=False):
    """A `tf.data.Dataset` of ({"token_ids", "segment_ids", "padding_mask"}, labels) batches for a BERT classifier.

    Each batch of strings is tokenized inside the pipeline and packed by `keras_hub.layers.MultiSegmentPacker` into
    `[CLS] A [SEP]` (segment ids 0), or `[CLS] A [SEP] B [SEP]` (segment ids 0 up to the first [SEP], 1 after it),
    padded with [PAD] to `sequence_length`. A pair too long to fit is cut as BERT's `_truncate_seq_pair` cuts it: one
    token at a time from the end of the longer segment (of the second when both are as long). That is keras-hub's
    `"round_robin"` truncation, which hands out the budget a token at a time to each segment in turn; its
    `"waterfall"` mode would cut the second segment first. The special token ids come from `tokenizer.token_to_id`.

    Args:
        texts: list of str. The first (or only) segment of each example.
        labels: list of int. Class ids.
        tokenizer: a `keras_hub.tokenizers.WordPieceTokenizer` whose vocabulary has [CLS], [SEP] and [PAD], with no
            `sequence_length` of its own (its ids must come out ragged, unpadded).
        sequence_length: int. Length of every packed sequence, special tokens included.
        batch_size: int.
        second_texts: list of str, or None. The second segment of each example, for sentence-pair tasks.
        shuffle: bool. Shuffle the examples, in a new order every epoch. Defaults to False.
        seed: int. Shuffling seed: the same seed gives the same orders. Defaults to 0.
        drop_remainder: bool. Drop the last batch if it is smaller than `batch_size`. Defaults to False.
        trim_padding: bool. Cut each batch to its longest example (see `preprocessed_dataset`). Defaults to False.
        group_by_length: bool. Batch examples of similar length together (see `preprocessed_dataset`). Defaults to
            False.

    Returns:
        A dataset of (features, labels): `token_ids`, `segment_ids` and `padding_mask` (1 for real tokens, 0 for
        padding), each int32 (batch, sequence_length), and int32 labels (batch,).

    Example:
    ```python
    sst2 = kzoo.data.glue("sst2", "dev")
    batches = classification_dataset(sst2.texts, sst2.labels, tokenizer, sequence_length=128, batch_size=32)
    ```
    """
    segments = _segments(texts, labels, second_texts)
    num_special_tokens = len(segments) + 1
    if sequence_length <= num_special_tokens:
        raise ValueError(
            f"sequence_length={sequence_length} leaves no room for text after the {num_special_tokens} special tokens "
            f"of {len(segments)} segment(s); use a larger sequence_length."
        )
    pad_id = tokenizer.token_to_id("[PAD]")
    packer = keras_hub.layers.MultiSegmentPacker(
        sequence_length,
        start_value=tokenizer.token_to_id("[CLS]"),
        end_value=tokenizer.token_to_id("[SEP]"),
        pad_value=pad_id,
        truncate="round_robin",
    )

    def pack(batch_segments, batch_labels):
        token_ids, segment_ids = packer(tuple(tokenizer(segment) for segment in batch_segments))
        shape = (batch_labels.shape[0], sequence_length)  # static batch size where the batching makes one
        token_ids = tf.ensure_shape(tf.cast(token_ids, tf.int32), shape)
        features = {
            "token_ids": token_ids,
            "segment_ids": tf.ensure_shape(tf.cast(segment_ids, tf.int32), shape),
            "padding_mask": tf.cast(token_ids != pad_id, tf.int32),
        }
        return features, batch_labels

    return _batches(segments, labels, pack, batch_size, shuffle, seed, drop_remainder, trim_padding, group_by_length)


def preprocessed_dataset(texts, labels, preprocessor, batch_size, second_texts=None, shuffle=False, seed=0,
                         drop_remainder=False, trim_padding=True, group_by_length=False):
    """A `tf.data.Dataset` of ({"token_ids", "segment_ids", "padding_mask"}, labels) batches made by a preprocessor.

    The same batches as `classification_dataset`, for a checkpoint's own tokenizer: each batch of strings goes
    through `preprocessor(texts)` or `preprocessor(texts, second_texts)` (e.g. `kzoo.text.BertPreprocessor`) inside
    the pipeline. With `trim_padding`, every batch is cut to its longest example ("dynamic padding"): the columns
    cut hold only padding, which the encoder masks out, so the model's outputs are unchanged while short sentences
    cost a fraction of `sequence_length` (SST-2 batches average about 40 of 64 positions). With `group_by_length`
    as well, each batch holds examples of the same or nearly the same length, so almost nothing is padding: the
    shuffled examples are tokenized `LENGTH_GROUP_BATCHES` batches at a time, sorted by their number of tokens, cut
    into batches, and those batches shuffled again (SST-2 batches then average 13.8 positions for 13.3 real tokens
    per example). Every example is still seen once per pass; only which examples share a batch changes.

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
    preprocessor = kzoo.text.BertPreprocessor.from_checkpoint(path, sequence_length=64)
    sst2 = kzoo.data.glue("sst2", "train")
    batches = preprocessed_dataset(sst2.texts, sst2.labels, preprocessor, batch_size=32, shuffle=True)
    ```
    """
    segments = _segments(texts, labels, second_texts)

    def preprocess(batch_segments, batch_labels):
        return {name: tf.cast(value, tf.int32) for name, value in preprocessor(*batch_segments).items()}, batch_labels

    return _batches(segments, labels, preprocess, batch_size, shuffle, seed, drop_remainder, trim_padding,
                    group_by_length)


def trim_to_longest(features):
    """Cut BERT features (batch, sequence_length) to the batch's longest example, found from `padding_mask` (one
    position for an empty batch, so that a [CLS] position exists)."""
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
