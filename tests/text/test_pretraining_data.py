import itertools
import random
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.data.wikitext import WIKITEXT2_DIR, wikitext2_file, wikitext_documents
from kzoo.text.bert_preprocessor import BertPreprocessor
from kzoo.text.pretraining_data import (
    IS_NEXT,
    NOT_NEXT,
    _sentence_pairs,
    _truncate_pair,
    masked_lm_rule,
    pretraining_dataset,
)
from kzoo.text.wordpiece import CLS_ID, MASK_ID, PAD_ID, RESERVED_TOKENS, SEP_ID

SHIPPED_VOCABULARY = WIKITEXT2_DIR / "vocab.txt"

# Synthetic corpus: sentence k of document d is the single token "d{d}s{k}", so every token says where it came from,
# and no pair is ever cut (chunks and random B segments stop exactly at their target length).
DOCUMENTS, SENTENCES = 400, 50
MARKERS = [f"d{d}s{k}" for d in range(DOCUMENTS) for k in range(SENTENCES)]


def synthetic_documents():
    return ([f"d{d}s{k}" for k in range(SENTENCES)] for d in range(DOCUMENTS))


@pytest.fixture(scope="module")
def synthetic_tokenizer():
    return BertPreprocessor(list(RESERVED_TOKENS) + MARKERS, sequence_length=32)


def synthetic_dataset(tokenizer, seed):
    return pretraining_dataset(
        synthetic_documents, tokenizer, batch_size=64, max_predictions=3, document_buffer=8, seed=seed,
    )


@pytest.fixture(scope="module")
def synthetic_epochs(synthetic_tokenizer):
    """Two epochs of one dataset, each a list of examples."""
    dataset = synthetic_dataset(synthetic_tokenizer, seed=3)
    return list(rows(dataset)), list(rows(dataset))


@pytest.fixture(scope="module")
def wikitext_tokenizer():
    return BertPreprocessor(SHIPPED_VOCABULARY, sequence_length=128)


def valid_documents():
    return wikitext_documents(wikitext2_file("valid"))


def rows(dataset):
    """Every example of one epoch as numpy arrays, with the original ids put back at the masked positions."""
    for features, labels, weights in dataset:
        features = {name: value.numpy() for name, value in features.items()}
        labels = {name: value.numpy() for name, value in labels.items()}
        weights = {name: value.numpy() for name, value in weights.items()}
        for i in range(len(labels["nsp"])):
            used = weights["mlm"][i] > 0
            positions = features["masked_positions"][i][used]
            original = features["token_ids"][i].copy()
            original[positions] = labels["mlm"][i][used]
            yield {
                "original": original,
                "masked": features["token_ids"][i],
                "segments": features["segment_ids"][i],
                "padding": features["padding_mask"][i],
                "positions": positions,
                "targets": labels["mlm"][i][used],
                "nsp": labels["nsp"][i],
                "row": (features["masked_positions"][i], labels["mlm"][i], weights["mlm"][i], weights["nsp"][i]),
            }


def segments(example):
    """(A, B) token ids of an example, checking the `[CLS] A [SEP] B [SEP] [PAD]...` layout on the way."""
    original, segment_ids = example["original"], example["segments"]
    length = int(example["padding"].sum())
    a_length = int((segment_ids[:length] == 0).sum()) - 2
    b_length = length - a_length - 3
    assert a_length >= 1 and b_length >= 1
    assert original[0] == CLS_ID and original[a_length + 1] == SEP_ID and original[length - 1] == SEP_ID
    np.testing.assert_array_equal(original[length:], PAD_ID)
    padding = len(original) - length
    np.testing.assert_array_equal(segment_ids, [0] * (a_length + 2) + [1] * (b_length + 1) + [0] * padding)
    np.testing.assert_array_equal(example["padding"], [1] * length + [0] * padding)
    a, b = original[1 : a_length + 1], original[a_length + 2 : length - 1]
    assert not set(a.tolist() + b.tolist()) & {PAD_ID, CLS_ID, SEP_ID}
    return a, b


def marker_positions(ids):
    """(document, sentence) of each synthetic token id."""
    return [tuple(map(int, re.fullmatch(r"d(\d+)s(\d+)", MARKERS[i - len(RESERVED_TOKENS)]).groups())) for i in ids]


def words(example, vocabulary):
    """The words of an example as sets of positions: a piece and the "##" pieces after it, within a segment."""
    a, b = segments(example)
    found = []
    for offset, ids in ((1, a), (len(a) + 2, b)):
        starts = [i for i, piece in enumerate(ids) if i == 0 or not vocabulary[piece].startswith("##")]
        found += [set(range(offset + s, offset + e)) for s, e in zip(starts, starts[1:] + [len(ids)])]
    return found


def test_pairs_follow_the_recipe_on_a_synthetic_corpus(synthetic_epochs):
    examples = synthetic_epochs[0]
    assert len(examples) >= 1000
    for example in examples:
        a, b = (marker_positions(segment) for segment in segments(example))  # labels put back: the true originals
        assert len(a) + len(b) <= 32 - 3
        for run in (a, b):  # each segment is consecutive sentences of one document
            assert [d for d, _ in run] == [run[0][0]] * len(run)
            assert [k for _, k in run] == list(range(run[0][1], run[0][1] + len(run)))
        if example["nsp"] == IS_NEXT:
            assert b[0] == (a[-1][0], a[-1][1] + 1)
        else:
            assert example["nsp"] == NOT_NEXT
            assert b[0][0] != a[0][0]  # another document, from the same block of 8 documents
            assert b[0][0] // 8 == a[0][0] // 8
        # round(0.15 * maskable) targets, at least 1, at most max_predictions=3 (a full pair would take 4).
        assert len(example["positions"]) == min(3, max(1, int(np.floor(0.15 * (len(a) + len(b)) + 0.5))))


def test_next_sentence_labels_are_balanced(synthetic_epochs):
    labels = np.array([example["nsp"] for epoch in synthetic_epochs for example in epoch])
    assert len(labels) > 2500
    # Half NotNext, plus the one-sentence chunks at document ends, which can only be NotNext: 52.3% on this corpus
    # (the pair builder alone over 30 seeds). 3 binomial sigmas at n=2500 are 0.03.
    assert labels.mean() == pytest.approx(0.523, abs=0.03)


def test_short_sequences_follow_short_seq_prob(synthetic_epochs):
    # A document aiming at the full 29 tokens gives at least one full pair; one of the 10% that aim at a random
    # length in [2, 29] gives none, unless it drew 29. Expected 9.6% of 800 document-epochs, sigma 1.0%.
    short = []
    for epoch in synthetic_epochs:
        full = {marker_positions(segments(e)[0][:1])[0][0] for e in epoch if e["padding"].sum() == 32}
        short += [d not in full for d in range(DOCUMENTS)]
    assert np.mean(short) == pytest.approx(0.096, abs=0.03)


def test_truncation_cuts_the_longer_segment_at_either_end():
    a, b = np.arange(100), np.arange(1000, 1010)
    rng = random.Random(0)
    cuts = [_truncate_pair(a, b, 30, rng) for _ in range(200)]
    for kept_a, kept_b in cuts:
        np.testing.assert_array_equal(kept_b, b)  # B is never the longer one here
        assert len(kept_a) == 20 and kept_a[-1] - kept_a[0] == 19  # a contiguous stretch of A
    starts = np.array([kept_a[0] for kept_a, _ in cuts])
    assert starts.min() > 0 and starts.max() < 80 and 35 <= starts.mean() <= 45  # 80 cuts, half from each end
    kept_a, kept_b = _truncate_pair(np.arange(40), np.arange(40), 30, rng)
    assert len(kept_a) == len(kept_b) == 15


def test_masking_rates_over_many_samples(wikitext_tokenizer):
    dataset = pretraining_dataset(valid_documents, wikitext_tokenizer, batch_size=64, seed=0)
    vocabulary = wikitext_tokenizer.vocabulary
    special = {PAD_ID, CLS_ID, SEP_ID}
    spare = wikitext_tokenizer.token_to_id("[unused0]")  # ids from here on are "[unusedN]"
    chosen = maskable = masked = replaced = kept = partly_taken_words = 0
    for example in rows(dataset):
        taken = set(example["positions"].tolist())
        partly_taken_words += sum(bool(w & taken) and not w <= taken for w in words(example, vocabulary))
        row_maskable = int(example["padding"].sum()) - 3
        count = len(example["positions"])
        assert count == min(20, max(1, int(np.floor(0.15 * row_maskable + 0.5))))  # 15%, at most max_predictions
        positions, targets, weights, nsp_weight = example["row"]
        np.testing.assert_array_equal(weights, [1.0] * count + [0.0] * (20 - count))
        assert not positions[count:].any() and not targets[count:].any() and nsp_weight == 1.0
        assert list(example["positions"]) == sorted(set(example["positions"]))
        assert not set(example["targets"].tolist()) & special  # [CLS], [SEP] and padding are never targets
        others = np.ones(128, bool)
        others[example["positions"]] = False
        np.testing.assert_array_equal(example["masked"][others], example["original"][others])
        corrupted = example["masked"][example["positions"]]
        chosen, maskable = chosen + count, maskable + row_maskable
        masked += int((corrupted == MASK_ID).sum())
        kept += int((corrupted == example["targets"]).sum())
        replacements = corrupted[(corrupted != MASK_ID) & (corrupted != example["targets"])]
        assert (replacements >= len(RESERVED_TOKENS)).all() and (replacements < spare).all()
        replaced += len(replacements)
    # About 45,000 targets: one binomial sigma is 0.0019 for 80% and 0.0014 for 10%; the tolerances are 5 sigmas.
    assert chosen > 40000
    assert partly_taken_words > 1000  # single pieces, not whole words
    assert chosen / maskable == pytest.approx(0.15, abs=0.003)
    assert masked / chosen == pytest.approx(0.8, abs=0.01)
    assert replaced / chosen == pytest.approx(0.1, abs=0.007)
    assert kept / chosen == pytest.approx(0.1, abs=0.007)


def test_whole_word_masking_takes_every_piece_of_a_word(wikitext_tokenizer):
    dataset = pretraining_dataset(
        valid_documents, wikitext_tokenizer, batch_size=64, whole_word=True, seed=0
    )
    chosen = budgets = whole_split_words = 0
    for example in itertools.islice(rows(dataset), 1000):
        taken = set(example["positions"].tolist())
        for word in words(example, wikitext_tokenizer.vocabulary):
            assert not word & taken or word <= taken
            whole_split_words += len(word) > 1 and word <= taken
        maskable = int(example["padding"].sum()) - 3
        budget = min(20, max(1, int(np.floor(0.15 * maskable + 0.5))))
        assert budget - 6 <= len(taken) <= budget  # the first word that does not fit ends the choice
        chosen, budgets = chosen + len(taken), budgets + budget
    assert whole_split_words > 100  # words of several pieces really were taken, whole
    assert 0.97 * budgets <= chosen <= budgets


def test_epochs_differ_and_runs_repeat(synthetic_tokenizer, synthetic_epochs):
    epoch_0, epoch_1 = synthetic_epochs
    keras.utils.set_random_seed(99)  # the global seed plays no part
    again = next(iter(synthetic_dataset(synthetic_tokenizer, seed=3)))
    np.testing.assert_array_equal(again[0]["token_ids"], [example["masked"] for example in epoch_0[:64]])
    np.testing.assert_array_equal(again[1]["nsp"], [example["nsp"] for example in epoch_0[:64]])
    assert np.mean([(e0["masked"] != e1["masked"]).any() for e0, e1 in zip(epoch_0, epoch_1)]) > 0.9
    assert np.mean([e0["nsp"] != e1["nsp"] for e0, e1 in zip(epoch_0, epoch_1)]) > 0.3


def test_the_same_pair_gets_new_masks_each_epoch(synthetic_tokenizer):
    # Documents of two 14-token sentences give one pair each, always the same when it is IsNext.
    def documents():
        return ([" ".join(f"d{d}s{k}" for k in range(start, start + 14)) for start in (0, 14)] for d in range(200))

    dataset = pretraining_dataset(documents, synthetic_tokenizer, batch_size=64, seed=4)
    first, second = ({tuple(e["original"]): tuple(e["positions"]) for e in rows(dataset)} for _ in range(2))
    same_pairs = first.keys() & second.keys()
    assert len(same_pairs) > 30
    assert np.mean([first[pair] != second[pair] for pair in same_pairs]) > 0.9


def test_masked_lm_rule_gives_the_pipelines_masks(synthetic_tokenizer, synthetic_epochs):
    # Batch i of epoch e is masked with mask(token_ids, seed, e, i): the same call on the unmasked ids gives them back.
    mask = masked_lm_rule(synthetic_tokenizer, max_predictions=3)
    epoch_1 = synthetic_epochs[1]
    for index in range(0, len(epoch_1) // 64, 7):
        batch = epoch_1[index * 64 : (index + 1) * 64]
        masked, positions, targets, weights = mask(np.stack([e["original"] for e in batch]), 3, 1, index)
        np.testing.assert_array_equal(masked, [e["masked"] for e in batch])
        np.testing.assert_array_equal(positions, [e["row"][0] for e in batch])
        np.testing.assert_array_equal(targets, [e["row"][1] for e in batch])
        np.testing.assert_array_equal(weights, [e["row"][2] for e in batch])
    other_epoch = mask(np.stack([e["original"] for e in epoch_1[:64]]), 3, 2, 0)[1]
    assert np.mean((other_epoch.numpy() != [e["row"][0] for e in epoch_1[:64]]).any(axis=1)) > 0.9


def test_streams_a_corpus_with_bounded_memory(synthetic_tokenizer):
    pulled = []

    def endless_documents():
        for d in itertools.count():
            pulled.append(d)
            yield [f"d{d % DOCUMENTS}s{k}" for k in range(SENTENCES)]

    dataset = pretraining_dataset(
        endless_documents, synthetic_tokenizer, batch_size=64, document_buffer=8
    )
    features, labels, _ = next(iter(dataset))
    assert features["token_ids"].shape == (64, 32) and labels["nsp"].shape == (64,)
    # A block of 8 documents gives 20-odd pairs, so the first batch needs 3 blocks; tf.data's buffers read ahead a
    # few more (13 blocks in all, however long the iterator then waits), never the endless rest.
    assert 16 <= len(pulled) <= 8 * 20


def test_vocabulary_with_reserved_tokens_elsewhere(synthetic_tokenizer):
    # Google's vocab.txt layout: [PAD] 0, [unused0..98], [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103.
    vocabulary = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + MARKERS
    dataset = pretraining_dataset(synthetic_documents, BertPreprocessor(vocabulary, sequence_length=32))
    features, labels, weights = next(iter(dataset))
    token_ids = features["token_ids"].numpy()
    np.testing.assert_array_equal(token_ids[:, 0], 101)
    assert ((token_ids == 102).sum(axis=1) == 2).all()
    used = weights["mlm"].numpy() > 0
    corrupted = np.take_along_axis(token_ids, features["masked_positions"].numpy(), axis=1)[used]
    assert (corrupted == 103).mean() > 0.6
    assert (corrupted[corrupted != 103] >= 104).all()  # random replacements are never reserved or [unusedN]
    assert (labels["mlm"].numpy()[used] >= 104).all()


def test_bad_arguments_are_clear_errors(synthetic_tokenizer):
    def build(documents_fn=synthetic_documents, tokenizer=synthetic_tokenizer, **kwargs):
        return pretraining_dataset(documents_fn, tokenizer, **kwargs)

    with pytest.raises(TypeError, match="is not callable"):
        build(documents_fn=list(synthetic_documents()))
    with pytest.raises(ValueError, match="sequence_length=4 cannot hold"):
        build(tokenizer=BertPreprocessor(list(RESERVED_TOKENS), sequence_length=4))
    with pytest.raises(ValueError, match="max_predictions=30 must be between 1 and sequence_length - 3 = 29"):
        build(max_predictions=30)
    with pytest.raises(ValueError, match="mask_rate=0 must be in"):
        build(mask_rate=0)
    with pytest.raises(ValueError, match="document_buffer=1 is too small"):
        build(document_buffer=1)


def test_bad_documents_are_clear_errors():
    # The generator stage, with a stand-in tokenizer (one id per word): errors there reach the user through tf.data.
    def pairs(documents):
        return list(_sentence_pairs(documents, word_ids, random.Random(0), 29, 0.1, 8))

    def word_ids(texts):
        return tf.ragged.map_flat_values(tf.strings.length, tf.strings.split(texts))

    assert {label for *_, label in pairs([["One . Two ."], ["Three . Four ."]])} <= {IS_NEXT, NOT_NEXT}
    with pytest.raises(ValueError, match="a single non-empty document"):
        pairs([["Only one .", "Document ."], [], [""]])
    with pytest.raises(TypeError, match="yielded the string 'A document as one string .'"):
        pairs(["A document as one string ."])
