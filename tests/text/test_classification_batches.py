import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from kzoo.text import classification_dataset

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "##s",
              "."]
CLS, SEP = 2, 3
WORDS = VOCABULARY[5:13]  # ids 5 to 12


@pytest.fixture(scope="module")
def tokenizer():
    return keras_hub.tokenizers.WordPieceTokenizer(vocabulary=VOCABULARY, lowercase=True, strip_accents=True)


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


def test_single_sentences_are_packed_as_cls_text_sep(tokenizer):
    [(features, labels)] = batches(classification_dataset(["The cat sat.", "A Zebra"], [1, 0], tokenizer, 8, 4))
    np.testing.assert_array_equal(features["token_ids"], [[CLS, 5, 6, 7, 14, SEP, 0, 0], [CLS, 10, 1, SEP, 0, 0, 0, 0]])
    np.testing.assert_array_equal(features["segment_ids"], np.zeros((2, 8)))
    np.testing.assert_array_equal(features["padding_mask"], [[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0]])
    np.testing.assert_array_equal(labels, [1, 0])
    assert all(v.dtype == np.int32 for v in features.values()) and labels.dtype == np.int32


def test_pairs_are_packed_with_segment_ids(tokenizer):
    dataset = classification_dataset(["A dogs"], [1], tokenizer, 10, 4, second_texts=["the cat"])
    [(features, labels)] = batches(dataset)
    np.testing.assert_array_equal(features["token_ids"], [[CLS, 10, 11, 13, SEP, 5, 6, SEP, 0, 0]])
    np.testing.assert_array_equal(features["segment_ids"], [[0, 0, 0, 0, 0, 1, 1, 1, 0, 0]])
    np.testing.assert_array_equal(features["padding_mask"], [[1, 1, 1, 1, 1, 1, 1, 1, 0, 0]])
    assert labels.tolist() == [1]
    spec = dataset.element_spec
    assert spec[0]["token_ids"].shape.as_list() == [None, 10] and spec[1].shape.as_list() == [None]


def test_overlong_pairs_are_cut_by_berts_rule(tokenizer):
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
        classification_dataset(firsts, list(range(len(lengths))), tokenizer, 10, 16, second_texts=seconds)
    )
    np.testing.assert_array_equal(features["token_ids"], expected)
    # Both segments long: the first keeps one token more than the second ([CLS] + 4 + [SEP] + 3 + [SEP]).
    np.testing.assert_array_equal(features["segment_ids"][2], [0] * 6 + [1] * 4)
    # One sentence: its first sequence_length - 2 tokens.
    text, ids = words(0, 12)
    [(features, _)] = batches(classification_dataset([text], [0], tokenizer, 6, 1))
    np.testing.assert_array_equal(features["token_ids"], [[CLS] + ids[:4] + [SEP]])


def test_shuffling_is_seeded_and_keeps_each_label_with_its_text(tokenizer):
    texts = [" ".join(["cat"] * (i + 1)) for i in range(20)]  # example i has i + 1 tokens and label i

    def epoch_orders(seed):
        dataset = classification_dataset(texts, list(range(20)), tokenizer, 24, 8, shuffle=True, seed=seed)
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


def test_drop_remainder_gives_full_static_batches(tokenizer):
    dataset = classification_dataset(["the cat"] * 10, [1] * 10, tokenizer, 6, 4, drop_remainder=True)
    assert dataset.element_spec[0]["padding_mask"].shape.as_list() == [4, 6]
    assert [labels.shape for _, labels in batches(dataset)] == [(4,), (4,)]


def test_bad_inputs_are_clear_errors(tokenizer):
    with pytest.raises(ValueError, match="labels has 1 entries but texts has 2"):
        classification_dataset(["a", "b"], [0], tokenizer, 8, 2)
    with pytest.raises(ValueError, match="second_texts has 1 entries but texts has 2"):
        classification_dataset(["a", "b"], [0, 1], tokenizer, 8, 2, second_texts=["c"])
    with pytest.raises(ValueError, match="sequence_length=3 leaves no room"):
        classification_dataset(["a"], [0], tokenizer, 3, 2, second_texts=["c"])
    no_cls = keras_hub.tokenizers.WordPieceTokenizer(vocabulary=[t for t in VOCABULARY if t != "[CLS]"])
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        classification_dataset(["a"], [0], no_cls, 8, 2)
    assert isinstance(classification_dataset(["a"], [0], tokenizer, 8, 2), tf.data.Dataset)
