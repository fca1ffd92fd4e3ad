import hashlib
import os
import pathlib

import pytest
import tensorflow as tf

from kzoo.text import wordpiece
from kzoo.text.bert_preprocessor import BertPreprocessor
from kzoo.text.wordpiece import (
    CLS_ID,
    MASK_ID,
    PAD_ID,
    RESERVED_TOKENS,
    SEP_ID,
    UNK_ID,
    learn_wordpiece_vocabulary,
    load_vocabulary,
    read_vocabulary,
    save_vocabulary,
)

SHIPPED_VOCABULARY = pathlib.Path(__file__).resolve().parents[2] / "data" / "wikitext2" / "vocab.txt"
CORPUS = [
    "The café opened early. The cafes close late!",
    "Playing, played, plays: the player plays [UNK] games.",
    "Unbreakable and unbelievable things happened in the café.",
] * 20


@pytest.fixture(scope="module")
def vocabulary():
    return learn_wordpiece_vocabulary(CORPUS, vocabulary_size=120)


def pieces(preprocessor, text):
    return [preprocessor.vocabulary[i] for i in preprocessor.tokenize([text])[0].numpy()]


def test_reserved_tokens_come_first_in_berts_order(vocabulary):
    assert (PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID) == (0, 1, 2, 3, 4)
    assert RESERVED_TOKENS == ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    assert vocabulary[:5] == list(RESERVED_TOKENS)


def test_learning_is_uncased_deterministic_and_fills_the_size(vocabulary):
    assert len(vocabulary) == 120 and len(set(vocabulary)) == 120
    assert learn_wordpiece_vocabulary(iter(CORPUS), vocabulary_size=120) == vocabulary  # a generator works too
    dataset = tf.data.Dataset.from_tensor_slices(CORPUS)
    assert learn_wordpiece_vocabulary(dataset, vocabulary_size=120) == vocabulary
    assert {"the", "cafe", "plays", "##s"} <= set(vocabulary)
    assert not {"The", "café", "unk"} & set(vocabulary)  # lowercased, accents stripped, "[UNK]" is no word
    learned = vocabulary[: vocabulary.index("[unused0]")]  # the learner gave fewer; the rest is spare ids
    assert vocabulary[len(learned) :] == [f"[unused{i}]" for i in range(120 - len(learned))]
    cased = learn_wordpiece_vocabulary(CORPUS, 120, lowercase=False, strip_accents=False)
    assert {"The", "é"} <= set(cased)


def test_a_learned_vocabulary_tokenizes_with_the_bert_preprocessor(vocabulary):
    tokenizer = BertPreprocessor(vocabulary)  # kzoo's one BERT text pipeline, for learned vocabularies too
    assert pieces(tokenizer, "The Café plays") == ["the", "cafe", "plays"]
    assert pieces(tokenizer, "playful") == ["p", "##l", "##a", "##y", "##f", "##u", "##l"]  # unseen: spelt out
    ids = tokenizer.tokenize(["[UNK] games , [MASK] zzz"])[0].numpy().tolist()
    assert ids[0] == UNK_ID and ids[-1] == UNK_ID  # "zzz" has no pieces: unknown too
    assert ids[-2] == MASK_ID  # reserved tokens written in text stay whole, as transformers keeps them
    padded = BertPreprocessor(vocabulary, sequence_length=6)(["the cafe"])["token_ids"]
    assert padded[0, 3:].numpy().tolist() == [SEP_ID, PAD_ID, PAD_ID]


def test_shipped_wikitext2_vocabulary():
    # The sha256 in data/wikitext2/SOURCE.md; kzoo.text.wordpiece.make_wikitext2_vocabulary makes the same file again.
    digest = hashlib.sha256(SHIPPED_VOCABULARY.read_bytes()).hexdigest()
    assert digest == "9cc3c6f2000d40138e0726ad5fa2972101b9fa7b318c98c5358966ac7ebdbc28"
    vocabulary = load_vocabulary(SHIPPED_VOCABULARY)
    assert len(vocabulary) == 8192 and vocabulary[:5] == list(RESERVED_TOKENS)
    assert vocabulary.index("[unused0]") == 8098  # tensorflow-text's learner gave 8098 tokens for 8192 asked
    tokenizer = BertPreprocessor(SHIPPED_VOCABULARY)
    assert pieces(tokenizer, "the cafe") == ["the", "c", "##af", "##e"]
    assert tokenizer.tokenize(["the cafe"])[0].numpy().tolist() == [174, 43, 5927, 219]
    assert pieces(tokenizer, "Café [UNK] lobster") == ["c", "##af", "##e", "[UNK]", "l", "##o", "##bs", "##ter"]


def test_save_and_load_round_trip(tmp_path, vocabulary):
    path = tmp_path / "sub" / "vocab.txt"
    save_vocabulary(vocabulary, path)
    assert [p.name for p in path.parent.iterdir()] == ["vocab.txt"]  # the temporary file was renamed
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert path.read_text(encoding="utf-8").splitlines() == vocabulary
    assert load_vocabulary(path) == vocabulary
    # Google's layout, reserved tokens elsewhere, loads too.
    google = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "the"]
    save_vocabulary(google, path)
    assert BertPreprocessor(path).token_to_id("[CLS]") == 101
    assert read_vocabulary(path) == google


def test_bad_vocabularies_are_clear_errors(tmp_path, vocabulary):
    with pytest.raises(FileNotFoundError, match="missing.txt does not exist"):
        load_vocabulary(tmp_path / "missing.txt")
    (tmp_path / "twice.txt").write_text("\n".join(list(RESERVED_TOKENS) + ["the", "a", "the"]) + "\n")
    with pytest.raises(ValueError, match=r"token 'the' appears twice \(ids 5 and 7\)"):
        load_vocabulary(tmp_path / "twice.txt")
    (tmp_path / "blank.txt").write_text("\n".join(list(RESERVED_TOKENS) + ["", "a"]) + "\n")
    with pytest.raises(ValueError, match="token 5 is ''"):
        load_vocabulary(tmp_path / "blank.txt")
    (tmp_path / "no_mask.txt").write_text("\n".join(list(RESERVED_TOKENS[:4]) + ["the"]) + "\n")
    with pytest.raises(ValueError, match=r"lacks the reserved tokens \['\[MASK\]'\]"):
        load_vocabulary(tmp_path / "no_mask.txt")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match="latin1.txt is not UTF-8 text"):
        read_vocabulary(tmp_path / "latin1.txt")
    with pytest.raises(ValueError, match="lacks the reserved tokens"):
        save_vocabulary(["the"], tmp_path / "never.txt")
    assert not (tmp_path / "never.txt").exists()
    with pytest.raises(ValueError, match="vocabulary_size=5 leaves no room"):
        learn_wordpiece_vocabulary(CORPUS, 5)
    with pytest.raises(ValueError, match="pass a dataset of scalar strings"):
        learn_wordpiece_vocabulary(tf.data.Dataset.from_tensor_slices(CORPUS).batch(2), 100)
    assert wordpiece.UNK_ID == vocabulary.index("[UNK]")
