"""Hugging Face's BERT `BasicTokenizer` as TensorFlow string ops: raw text to the words that WordPiece then splits.

transformers' Python BERT tokenizer (`BertTokenizer` up to v4, `BertTokenizerLegacy` since v5) cuts text into words
in these steps; `BertBasicTokenizer.split` takes the same steps in the same order, so it gives the same words:

1. Special tokens written in the text ("[MASK]") are cut out of the raw text first and kept whole.
2. `_clean_text`: U+0000, U+FFFD and control characters (Unicode category C*, unassigned code points included, but
   not tab, newline and carriage return) are dropped; whitespace (space, tab, newline, CR, category Zs) becomes a
   space.
3. `_tokenize_chinese_chars`: spaces go around each CJK ideograph (the code point ranges of `_is_chinese_char`).
4. The text is put in NFC and split on whitespace (`str.split`, which also splits at U+2028 and U+2029). A word equal
   to a special token stays whole and unchanged.
5. Each other word is lowercased by Python's `str.lower` (Greek capital sigma becomes final "ς" at the end of a
   word) when `lowercase`, and loses its accents (NFD, then category Mn dropped) when `strip_accents`.
6. Every punctuation character (ASCII 33-47, 58-64, 91-96, 123-126, or category P*) becomes a word of its own.

The character classes and the lowercase mapping are read from this Python's `unicodedata` and `str.lower` when the
tokenizer is made, as Hugging Face's tokenizer reads them, and are written into RE2 patterns and lookup tables: the
graph holds no Python, and gives Hugging Face's words for this Python's Unicode version (14.0 for Python 3.11) even
where TensorFlow's own Unicode tables are older or newer. Text is taken as UTF-8; invalid bytes count as U+FFFD, so
they are dropped, as Python's `bytes.decode(errors="replace")` followed by the tokenizer would drop them.
"""

import functools
import re
import sys
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

# transformers' BasicTokenizer._is_chinese_char (from Google's BERT tokenization.py).
CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)
# transformers' _is_punctuation: "all non-letter/number ASCII", then Unicode category P*.
ASCII_PUNCTUATION = frozenset(chr(c) for c in [*range(33, 48), *range(58, 65), *range(91, 97), *range(123, 127)])
CAPITAL_SIGMA, FINAL_SIGMA = "\u03a3", "\u03c2"
PROTECTED = "\ue000"  # stands for a word kept whole while the others are split at punctuation


def _class_body(codepoints):
    """The inside of a RE2 character class matching exactly `codepoints` (sorted ints), as ranges."""
    ranges = []
    for codepoint in codepoints:
        if ranges and ranges[-1][1] == codepoint - 1:
            ranges[-1][1] = codepoint
        else:
            ranges.append([codepoint, codepoint])
    return "".join(f"\\x{{{a:X}}}" + (f"-\\x{{{b:X}}}" if b > a else "") for a, b in ranges)


@functools.lru_cache(maxsize=None)
def unicode_tables():
    """HF's character classes as RE2 patterns, and `str.lower` as tables, from this Python (half a second, once).

    Returns a dict: `removed`, `whitespace`, `cjk`, `punctuation`, `nonspacing` (patterns matching one character);
    `final_sigma` (a pattern whose match, rewritten as `\\1ς\\2`, turns each capital sigma that `str.lower` makes
    final into "ς"); `lower_from`, `lower_to` (sorted int32 arrays: code point to its one-character lowercase);
    `lower_multi` (the characters whose lowercase is longer, U+0130 "İ" to "i̇", as (pattern, replacement) pairs).
    """
    removed, whitespace, punctuation, nonspacing, cased, ignorable = [], [], [], [], [], []
    lower_from, lower_to, lower_multi = [], [], []
    for codepoint in range(sys.maxunicode + 1):
        if 0xD800 <= codepoint <= 0xDFFF:
            continue  # surrogates cannot be written in UTF-8
        char = chr(codepoint)
        category = unicodedata.category(char)
        if category not in ("Cn", "Co"):  # unassigned and private-use characters have no case
            lowered = char.lower()
            if len(lowered) > 1:
                lower_multi.append((re.escape(char), lowered))
            elif lowered != char:
                lower_from.append(codepoint)
                lower_to.append(ord(lowered))
            # Python makes a capital sigma final when the nearest character before it that is not case-ignorable is
            # cased, and the nearest such character after it is not (CPython's handle_capital_sigma). Asking
            # str.lower itself sorts every character into "cased, not case-ignorable" and "case-ignorable".
            if (char + CAPITAL_SIGMA).lower()[-1] == FINAL_SIGMA:
                cased.append(codepoint)
            elif ("A" + char + CAPITAL_SIGMA).lower()[-1] == FINAL_SIGMA:
                ignorable.append(codepoint)
        if char in "\x00\ufffd" or (category[0] == "C" and char not in "\t\n\r"):
            removed.append(codepoint)
        elif char in "\t\n\r" or (category == "Zs" or char.isspace()) and char != " ":
            whitespace.append(codepoint)  # becomes a space
        else:
            if category[0] == "P" or char in ASCII_PUNCTUATION:
                punctuation.append(codepoint)
            if category == "Mn":
                nonspacing.append(codepoint)
    cased, ignorable = _class_body(cased), _class_body(ignorable)
    return {
        "removed": f"[{_class_body(removed)}]",
        "whitespace": f"[{_class_body(whitespace)}]",
        "cjk": "[" + "".join(f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in CJK_RANGES) + "]",
        "punctuation": f"[{_class_body(punctuation)}]",
        "nonspacing": f"[{_class_body(nonspacing)}]",
        "final_sigma": f"([{cased}][{ignorable}]*){CAPITAL_SIGMA}([{ignorable}]*(?:[^{cased}{ignorable}]|$))",
        "lower_from": np.array(lower_from, np.int32),
        "lower_to": np.array(lower_to, np.int32),
        "lower_multi": tuple(lower_multi),
    }


class BertBasicTokenizer:
    """Splits text into words exactly as Hugging Face's Python `BasicTokenizer` does, with TensorFlow string ops.

    Only TensorFlow and tensorflow-text ops run in `split`, so it works eagerly, in `tf.data` pipelines, in
    `tf.function`s and in exported SavedModels. The module docstring lists the steps.

    Args:
        special_tokens: list of str. Tokens kept whole where they are written in the text ("[CLS]", "[MASK]", ...),
            as transformers keeps its special tokens.
        lowercase: bool. Lowercase each word like Python's `str.lower` (HF's `do_lower_case`). Defaults to True.
        strip_accents: bool or None. Drop accents (NFD, then category Mn). None (the default) strips exactly when
            `lowercase`, as HF's `strip_accents=None` does.
        split_on_cjk: bool. Make each CJK ideograph a word of its own (HF's `tokenize_chinese_chars`). Defaults to
            True.

    Example:
    ```python
    from kzoo.text.bert_basic_tokenizer import BertBasicTokenizer

    BertBasicTokenizer(["[MASK]"]).split(tf.constant(["Café [MASK]!"]))  # [[b"cafe", b"[MASK]", b"!"]]
    ```

    References:
        - [transformers' tokenization_bert_legacy.py](https://github.com/huggingface/transformers/tree/main/src)
    """

    def __init__(self, special_tokens, lowercase=True, strip_accents=None, split_on_cjk=True):
        self.special_tokens = tuple(special_tokens)
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.split_on_cjk = split_on_cjk
        self._tables = unicode_tables()
        # Longest first: RE2 takes the first alternative that matches, transformers' trie the longest token.
        by_length = sorted(self.special_tokens, key=len, reverse=True)
        self._special_pattern = "|".join(re.escape(token) for token in by_length)

    @tf.autograph.experimental.do_not_convert  # plain TensorFlow ops: AutoGraph would only slow tracing
    def _lower(self, words):
        """Python's `str.lower`: final sigmas by their context, one-to-many mappings, then a table per character."""
        tables = self._tables
        words = tf.strings.regex_replace(words, tables["final_sigma"], f"\\1{FINAL_SIGMA}\\2")
        for pattern, lowered in tables["lower_multi"]:
            words = tf.strings.regex_replace(words, pattern, lowered)
        codepoints = tf.strings.unicode_decode(words, "UTF-8")  # (words, chars)
        flat = codepoints.flat_values
        upper, lower = tf.constant(tables["lower_from"]), tf.constant(tables["lower_to"])
        index = tf.minimum(tf.searchsorted(upper, flat), len(tables["lower_from"]) - 1)
        flat = tf.where(tf.gather(upper, index) == flat, tf.gather(lower, index), flat)
        return tf.strings.unicode_encode(codepoints.with_flat_values(flat), "UTF-8")

    @tf.autograph.experimental.do_not_convert
    def split(self, texts):
        """The words of each text: a 1-D string tensor in, a string `tf.RaggedTensor` (batch, words) out."""
        tables = self._tables
        texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace")
        # tf-text's regex_split ends a string at its first NUL byte; U+FFFD is dropped in step 2 just like NUL.
        texts = tf.strings.regex_replace(texts, r"\x00", "\ufffd")
        # Step 1: special tokens written in the text become chunks of their own.
        chunks = tf_text.regex_split(texts, self._special_pattern, self._special_pattern)  # (batch, chunks)
        raw = chunks.flat_values
        # Steps 2 to 4, on each chunk but special tokens.
        text = tf.strings.regex_replace(raw, tables["removed"], "")
        text = tf.strings.regex_replace(text, tables["whitespace"], " ")
        if self.split_on_cjk:
            text = tf.strings.regex_replace(text, tables["cjk"], r" \0 ")
        text = tf_text.normalize_utf8(text, "NFC")
        special_chunk = tf.strings.regex_full_match(raw, self._special_pattern)
        words = tf.strings.split(tf.where(special_chunk, raw, text))  # (chunks, words), split at spaces
        # Step 5, on each word but those equal to a special token.
        original = words.flat_values
        protected = tf.strings.regex_full_match(original, self._special_pattern)
        word = self._lower(original) if self.lowercase else original
        if self.strip_accents:
            word = tf.strings.regex_replace(tf_text.normalize_utf8(word, "NFD"), tables["nonspacing"], "")
        # Step 6: punctuation split off. A protected word goes through as a private-use character (cleaning removed
        # all of those from the text), which is no punctuation, and comes back whole.
        word = tf.where(protected, PROTECTED, word)
        pieces = tf_text.regex_split(word, tables["punctuation"], tables["punctuation"])  # (words, pieces)
        piece = pieces.flat_values
        piece = tf.where(piece == PROTECTED, tf.gather(original, pieces.value_rowids()), piece)
        nested = (chunks.row_splits, words.row_splits, pieces.row_splits)
        return tf.RaggedTensor.from_nested_row_splits(piece, nested, validate=False).merge_dims(1, -1)
