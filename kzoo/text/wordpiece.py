"""WordPiece vocabularies for BERT: learned from a corpus, read from and written to a vocab.txt.

The learning is keras-hub's (`compute_word_piece_vocabulary`, tensorflow-text underneath); this module fixes BERT's
reserved tokens and their ids, reads vocabulary files (`read_vocabulary`, the one reader kzoo has, also for every
checkpoint's vocab.txt), checks them and writes them atomically. The tokenizer that uses a vocabulary, kzoo's own or
a checkpoint's, is `kzoo.text.BertPreprocessor`.
"""

import re

import tensorflow as tf

from kzoo.data.shipped import resolve_data_path
from kzoo.data.wikitext import wikitext2_file, wikitext_documents
from kzoo.files import write_atomically

# BERT's reserved tokens, in the order of Google's vocab.txt. A vocabulary learned here puts them first, at these ids;
# a loaded one (Google's puts [UNK] at 100) may have them anywhere, so code reads ids with tokenizer.token_to_id.
RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(len(RESERVED_TOKENS))

_RESERVED_IN_TEXT = "|".join(re.escape(token) for token in RESERVED_TOKENS)  # a regex for tf.strings


def learn_wordpiece_vocabulary(texts, vocabulary_size, lowercase=True, strip_accents=True):
    """Learn a WordPiece vocabulary of `vocabulary_size` tokens, the reserved tokens first.

    Text is split on whitespace and punctuation, as `BertPreprocessor` splits it, and reserved tokens written in the
    text (a corpus that marks rare words as "[UNK]") are not counted as words. tensorflow-text's learner searches
    for a count threshold that gives between 95% and 100% of `vocabulary_size` tokens; the rest is filled with
    "[unused0]", "[unused1]", ..., as in Google's vocab.txt, so the embedding table has the size asked for and
    spare rows for tokens added later.

    Args:
        texts: an iterable of strings (a list, or a generator for a corpus larger than memory), or a
            `tf.data.Dataset` of scalar strings.
        vocabulary_size: int. Most tokens in the vocabulary, reserved tokens included.
        lowercase: bool. Lowercase text before learning. Defaults to True (an uncased vocabulary).
        strip_accents: bool. Remove accents before learning. Defaults to True.

    Returns:
        The vocabulary, a list of `vocabulary_size` strings; its index is the token id.

    Example:
    ```python
    from kzoo.text.wordpiece import learn_wordpiece_vocabulary

    vocabulary = learn_wordpiece_vocabulary(["The cat sat.", "The cats sat on the mat."] * 10, vocabulary_size=60)
    assert vocabulary[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and "the" in vocabulary
    ```
    """
    if vocabulary_size <= len(RESERVED_TOKENS):
        raise ValueError(
            f"vocabulary_size={vocabulary_size} leaves no room beside the {len(RESERVED_TOKENS)} reserved tokens; "
            "pass a few thousand."
        )
    if isinstance(texts, tf.data.Dataset):
        if texts.element_spec != tf.TensorSpec([], tf.string):
            raise ValueError(f"texts has elements {texts.element_spec}; pass a dataset of scalar strings (unbatch it).")
        dataset = texts
    else:
        dataset = tf.data.Dataset.from_generator(lambda: iter(texts), output_signature=tf.TensorSpec([], tf.string))
    dataset = dataset.batch(1024).map(lambda text: tf.strings.regex_replace(text, _RESERVED_IN_TEXT, " "))
    import keras_hub  # here: reading and writing vocabularies need no keras-hub

    vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
        dataset,
        vocabulary_size,
        lowercase=lowercase,
        strip_accents=strip_accents,
        reserved_tokens=list(RESERVED_TOKENS),
    )
    return vocabulary + [f"[unused{i}]" for i in range(vocabulary_size - len(vocabulary))]


def _check_vocabulary(vocabulary, source):
    seen = {}
    for index, token in enumerate(vocabulary):
        if not token or token != token.strip() or "\n" in token:
            raise ValueError(f"{source}: token {index} is {token!r}; tokens are non-empty, without surrounding space.")
        if token in seen:
            raise ValueError(f"{source}: token {token!r} appears twice (ids {seen[token]} and {index}); remove one.")
        seen[token] = index
    missing = [token for token in RESERVED_TOKENS if token not in seen]
    if missing:
        raise ValueError(f"{source} lacks the reserved tokens {missing}; BERT needs all of {RESERVED_TOKENS}.")


def read_vocabulary(path):
    """The tokens of a vocab.txt, one a line, the line number the id, read as transformers' `load_vocab` reads them
    (text lines, each without its line end), so that any checkpoint's vocabulary reads as its own tokenizer reads
    it; `path` may name a file kzoo ships, "kzoo:wikitext2/vocab.txt" (see `kzoo.data.resolve_data_path`). The one
    reader is `kzoo.checkpoints.vocabulary_file.read_vocabulary`, which refuses a file that is not UTF-8 text, is
    binary or holds no token, naming the file.

    Example:
    ```python
    from kzoo.text.wordpiece import read_vocabulary

    read_vocabulary(kzoo.data.shipped_file("wikitext2/vocab.txt"))[:5]  # ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    ```
    """
    from kzoo.checkpoints.vocabulary_file import read_vocabulary as read_vocabulary_file

    return read_vocabulary_file(resolve_data_path(path))


def load_vocabulary(path):
    """The tokens of a vocab.txt (`read_vocabulary`), checked to be distinct, without surrounding space, and to hold
    BERT's reserved tokens: what a vocabulary kzoo learns and trains with must be.

    Example:
    ```python
    from kzoo.text.wordpiece import load_vocabulary

    assert len(load_vocabulary(kzoo.data.shipped_file("wikitext2/vocab.txt"))) == 8192
    ```
    """
    vocabulary = read_vocabulary(path)
    _check_vocabulary(vocabulary, path)
    return vocabulary


def save_vocabulary(vocabulary, path):
    """Write a vocabulary as vocab.txt, one token per line, atomically (a reader never sees half a file).

    Example:
    ```python
    from kzoo.text.wordpiece import RESERVED_TOKENS, load_vocabulary, save_vocabulary

    save_vocabulary([*RESERVED_TOKENS, "the", "##s"], "vocab.txt")
    assert load_vocabulary("vocab.txt")[5:] == ["the", "##s"]
    ```
    """
    vocabulary = list(vocabulary)
    _check_vocabulary(vocabulary, "vocabulary")
    write_atomically(path, "".join(f"{token}\n" for token in vocabulary))


def make_wikitext2_vocabulary(output, vocabulary_size=8192):
    """Learn the uncased WordPiece vocabulary of the shipped WikiText-2 train split, write it to `output` and return
    it; data/wikitext2/vocab.txt is `make_wikitext2_vocabulary("data/wikitext2/vocab.txt")` (one to a few minutes).

    Example:
    ```python
    from kzoo.text.wordpiece import load_vocabulary, make_wikitext2_vocabulary

    # The vocabulary kzoo ships is this function's output (learning it again takes minutes, too long for here):
    shipped = load_vocabulary(kzoo.data.shipped_file("wikitext2/vocab.txt"))
    len(shipped), shipped[:6]  # (8192, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "!"])
    try:  # a size with no room beside the reserved tokens is refused before the corpus is read
        make_wikitext2_vocabulary("vocab.txt", vocabulary_size=5)
    except ValueError as error:
        print(error)  # vocabulary_size=5 leaves no room beside the 5 reserved tokens; pass a few thousand.
    ```
    """
    paragraphs = (p for document in wikitext_documents(wikitext2_file("train")) for p in document)
    vocabulary = learn_wordpiece_vocabulary(paragraphs, vocabulary_size)
    save_vocabulary(vocabulary, output)
    return vocabulary
