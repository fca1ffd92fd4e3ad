import numpy as np
import pytest
import tensorflow as tf

from kzoo.text import BertPreprocessor, preprocessed_dataset

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "##s",
              "."]
CLS, SEP = 2, 3
WORDS = VOCABULARY[5:13]  # ids 5 to 12


def fine_tuning_batches(texts, labels, sequence_length, batch_size, trim_padding=False, **options):
    """Fine-tuning batches of texts in VOCABULARY, through kzoo's one BERT pipeline, untrimmed unless asked."""
    preprocessor = BertPreprocessor(VOCABULARY, sequence_length)
    return preprocessed_dataset(texts, labels, preprocessor, batch_size, trim_padding=trim_padding, **options)


def batches(dataset):
    return [(({k: v.numpy() for k, v in features.items()}), labels.numpy()) for features, labels in dataset]


def words(start, count):
    """`count` vocabulary words from `start` on, as text and as their ids."""
    chosen = [WORDS[(start + i) % len(WORDS)] for i in range(count)]
    return " ".join(chosen), [VOCABULARY.index(w) for w in chosen]


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """BERT's run_classifier.py: pop from the end of the longer segment (the second on a tie) until both fit."""
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def test_single_sentences_are_packed_as_cls_text_sep():
    [(features, labels)] = batches(fine_tuning_batches(["The cat sat.", "A Zebra"], [1, 0], 8, 4))
    np.testing.assert_array_equal(features["token_ids"], [[CLS, 5, 6, 7, 14, SEP, 0, 0], [CLS, 10, 1, SEP, 0, 0, 0, 0]])
    np.testing.assert_array_equal(features["segment_ids"], np.zeros((2, 8)))
    np.testing.assert_array_equal(features["padding_mask"], [[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0]])
    np.testing.assert_array_equal(labels, [1, 0])
    assert all(v.dtype == np.int32 for v in features.values()) and labels.dtype == np.int32


def test_pairs_are_packed_with_segment_ids():
    dataset = fine_tuning_batches(["A dogs"], [1], 10, 4, second_texts=["the cat"])
    [(features, labels)] = batches(dataset)
    np.testing.assert_array_equal(features["token_ids"], [[CLS, 10, 11, 13, SEP, 5, 6, SEP, 0, 0]])
    np.testing.assert_array_equal(features["segment_ids"], [[0, 0, 0, 0, 0, 1, 1, 1, 0, 0]])
    np.testing.assert_array_equal(features["padding_mask"], [[1, 1, 1, 1, 1, 1, 1, 1, 0, 0]])
    assert labels.tolist() == [1]
    spec = dataset.element_spec
    assert spec[0]["token_ids"].shape.as_list() == [None, 10] and spec[1].shape.as_list() == [None]


def test_overlong_pairs_are_cut_by_berts_rule():
    lengths = [(9, 2), (2, 9), (6, 6), (7, 4), (4, 7), (5, 6), (6, 5), (1, 12), (3, 3), (8, 0)]
    firsts, seconds, expected = [], [], []
    for i, (length_a, length_b) in enumerate(lengths):
        (text_a, ids_a), (text_b, ids_b) = words(i, length_a), words(i + 3, length_b)
        firsts.append(text_a)
        seconds.append(text_b)
        truncate_seq_pair(ids_a, ids_b, 10 - 3)
        packed = [CLS] + ids_a + [SEP] + ids_b + [SEP]
        expected.append(packed + [0] * (10 - len(packed)))
    [(features, _)] = batches(
        fine_tuning_batches(firsts, list(range(len(lengths))), 10, 16, second_texts=seconds)
    )
    np.testing.assert_array_equal(features["token_ids"], expected)
    # Both segments long: the first keeps one token more than the second ([CLS] + 4 + [SEP] + 3 + [SEP]).
    np.testing.assert_array_equal(features["segment_ids"][2], [0] * 6 + [1] * 4)
    # One sentence: its first sequence_length - 2 tokens.
    text, ids = words(0, 12)
    [(features, _)] = batches(fine_tuning_batches([text], [0], 6, 1))
    np.testing.assert_array_equal(features["token_ids"], [[CLS] + ids[:4] + [SEP]])


def test_shuffling_is_seeded_and_keeps_each_label_with_its_text():
    texts = [" ".join(["cat"] * (i + 1)) for i in range(20)]  # example i has i + 1 tokens and label i

    def epoch_orders(seed):
        dataset = fine_tuning_batches(texts, list(range(20)), 24, 8, shuffle=True, seed=seed)
        orders = []
        for _ in range(2):
            order = []
            for features, labels in batches(dataset):
                np.testing.assert_array_equal(features["padding_mask"].sum(1), labels + 3)
                order += labels.tolist()
            orders.append(order)
        return orders

    first, second = epoch_orders(seed=3)
    assert sorted(first) == list(range(20)) and first != list(range(20))
    assert second != first  # a new order every epoch
    assert epoch_orders(seed=3) == [first, second]
    assert epoch_orders(seed=4)[0] != first


def test_drop_remainder_gives_full_static_batches():
    dataset = fine_tuning_batches(["the cat"] * 10, [1] * 10, 6, 4, drop_remainder=True)
    assert dataset.element_spec[0]["padding_mask"].shape.as_list() == [4, 6]
    assert [labels.shape for _, labels in batches(dataset)] == [(4,), (4,)]


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="labels has 1 entries but texts has 2"):
        fine_tuning_batches(["a", "b"], [0], 8, 2)
    with pytest.raises(ValueError, match="second_texts has 1 entries but texts has 2"):
        fine_tuning_batches(["a", "b"], [0, 1], 8, 2, second_texts=["c"])
    with pytest.raises(ValueError, match="sequence_length=3 leaves no room"):
        fine_tuning_batches(["a"], [0], 3, 2, second_texts=["c"])
    with pytest.raises(ValueError, match=r"lacks the special tokens \['\[CLS\]'\]"):
        BertPreprocessor([t for t in VOCABULARY if t != "[CLS]"], 8)
    assert isinstance(fine_tuning_batches(["a"], [0], 8, 2), tf.data.Dataset)


@pytest.mark.parametrize("pairs", [False, True])
def test_preprocessed_batches_are_trimmed_to_their_longest_example(pairs):
    texts = ["the cat", "a dog ran", "the cat sat on a mat", "dogs"]
    second = ["a mat", "the", "cat", "dogs ran on the mat"] if pairs else None
    preprocess = BertPreprocessor(VOCABULARY, 16)
    full = batches(fine_tuning_batches(texts, [0, 1, 2, 3], 16, 2, second_texts=second))
    trimmed = batches(preprocessed_dataset(texts, [0, 1, 2, 3], preprocess, 2, second_texts=second))
    untrimmed = batches(preprocessed_dataset(texts, [0, 1, 2, 3], preprocess, 2, second_texts=second,
                                             trim_padding=False))
    for (full_features, full_labels), (features, labels), (padded, _) in zip(full, trimmed, untrimmed):
        np.testing.assert_array_equal(labels, full_labels)
        longest = full_features["padding_mask"].sum(1).max()
        for name, value in features.items():
            assert value.shape == (2, longest) and value.dtype == np.int32
            np.testing.assert_array_equal(value, full_features[name][:, :longest])  # only padding was cut
            np.testing.assert_array_equal(padded[name], full_features[name])
    assert [f["token_ids"].shape[1] for f, _ in trimmed] == ([7, 11] if pairs else [5, 8])


def test_preprocessed_dataset_checks_its_columns():
    with pytest.raises(ValueError, match="labels has 1 entries but texts has 2"):
        preprocessed_dataset(["a", "b"], [0], BertPreprocessor(VOCABULARY, 8), 2)


def test_length_grouped_batches_hold_similar_lengths_and_every_example_once():
    from kzoo.text import classification_batches

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 30, size=200)
    texts = [words(i, int(n))[0] for i, n in enumerate(lengths)]
    labels = list(range(200))
    options = dict(shuffle=True, seed=3, trim_padding=True)
    grouped = fine_tuning_batches(texts, labels, 40, 4, group_by_length=True, **options)
    plain = fine_tuning_batches(texts, labels, 40, 4, **options)
    epochs = [batches(grouped), batches(grouped)]
    for epoch in epochs:
        seen = np.concatenate([batch_labels for _, batch_labels in epoch])
        assert sorted(seen.tolist()) == labels  # every example once per pass, each label with its own text
        for features, batch_labels in epoch:
            np.testing.assert_array_equal(features["padding_mask"].sum(1) - 2, lengths[batch_labels])
    assert [b.tolist() for _, b in epochs[0]] != [b.tolist() for _, b in epochs[1]]  # a new grouping each pass
    assert [b.tolist() for _, b in epochs[0]] == [b.tolist() for _, b in batches(fine_tuning_batches(
        texts, labels, 40, 4, group_by_length=True, **options))]  # seeded
    mean_width = {name: np.mean([f["token_ids"].shape[1] for f, _ in data])
                  for name, data in (("grouped", epochs[0]), ("plain", batches(plain)))}
    assert mean_width["grouped"] < 0.75 * mean_width["plain"]
    spread = [np.ptp(lengths[b]) for _, b in epochs[0]]
    assert np.median(spread) <= 2  # 200 examples fit in one sorting window of LENGTH_GROUP_BATCHES batches
    assert classification_batches.LENGTH_GROUP_BATCHES * 4 >= 200
    with pytest.raises(ValueError, match="needs shuffle=True"):
        fine_tuning_batches(texts, labels, 40, 4, group_by_length=True)


@pytest.mark.parametrize("pairs", [False, True])
def test_length_grouping_sorts_by_tokens_not_characters(pairs):
    # Character counts say little here: "a" is one token of one character, "zz...z" one [UNK] token of 1 to 59
    # characters. Sorted by tokens, the batches cut one sorted window, so their ranges add up to at most the
    # window's range; sorted by characters they would not.
    rng = np.random.default_rng(1)
    counts = rng.integers(1, 16, size=96)
    texts = [" ".join(["a"] * int(n)) + " " + "z" * int(z) for n, z in zip(counts, rng.integers(1, 60, size=96))]
    second = [" ".join(["a"] * int(n)) for n in counts] if pairs else None
    tokens = 2 * counts + 4 if pairs else counts + 3  # [CLS] a.. [UNK] [SEP] (a.. [SEP])
    options = dict(second_texts=second, shuffle=True, seed=5, drop_remainder=True, group_by_length=True)
    for batched in (fine_tuning_batches(texts, list(range(96)), 40, 4, trim_padding=True, **options),
                    preprocessed_dataset(texts, list(range(96)), BertPreprocessor(VOCABULARY, 40), 4, **options)):
        epoch = batches(batched)
        for features, batch_labels in epoch:
            np.testing.assert_array_equal(features["padding_mask"].sum(1), tokens[batch_labels])
            assert features["token_ids"].shape == (4, tokens[batch_labels].max())  # trimmed to the longest
        assert sum(np.ptp(tokens[b]) for _, b in epoch) <= np.ptp(tokens)
        assert sorted(np.concatenate([b for _, b in epoch]).tolist()) == list(range(96))
