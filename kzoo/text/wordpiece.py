"""WordPiece vocabularies for BERT: learned from a corpus or loaded from a vocab.txt, and the tokenizer that uses them.

The learning and the tokenizing are keras-hub's (`compute_word_piece_vocabulary`, `WordPieceTokenizer`, both running
tensorflow-text underneath); this module fixes BERT's reserved tokens and their ids, checks vocabulary files, and
writes them atomically.
"""

import pathlib
import re

import keras_hub
import tensorflow as tf

from kzoo.data.wikitext import wikitext2_file, wikitext_documents
from kzoo.files import write_atomically

# BERT's reserved tokens, in the order of Google's vocab.txt. A vocabulary learned here puts them first, at these ids;
# a loaded one (Google's puts [UNK] at 100) may have them anywhere, so code reads ids with tokenizer.token_to_id.
RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(len(RESERVED_TOKENS))

_RESERVED_IN_TEXT = "|".join(re.escape(token) for token in RESERVED_TOKENS)  # a regex for tf.strings


def learn_wordpiece_vocabulary(texts, vocabulary_size, lowercase=True, strip_accents=True):
    """Learn a WordPiece vocabulary of `vocabulary_size` tokens, the reserved tokens first.

    Text is split on whitespace and punctuation, like `wordpiece_tokenizer` does, and reserved tokens written in the
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


def load_vocabulary(path):
    """The tokens of a vocab.txt (one token per line, the line number is the id), checked for BERT's reserved tokens."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: pass a vocab.txt with one WordPiece token per line.")
    # Lines end at "\n" only: str.splitlines would also split tokens at characters such as U+2028 or U+001C.
    lines = path.read_text(encoding="utf-8").removesuffix("\n").split("\n")
    vocabulary = [line.removesuffix("\r") for line in lines]
    _check_vocabulary(vocabulary, path)
    return vocabulary


def save_vocabulary(vocabulary, path):
    """Write a vocabulary as vocab.txt, one token per line, atomically (a reader never sees half a file)."""
    vocabulary = list(vocabulary)
    _check_vocabulary(vocabulary, "vocabulary")
    write_atomically(path, "".join(f"{token}\n" for token in vocabulary))


def wordpiece_tokenizer(vocabulary, lowercase=True, strip_accents=True, sequence_length=None):
    """A keras-hub `WordPieceTokenizer` for BERT: text to WordPiece ids, usable eagerly and inside `tf.data` maps.

    The text "[UNK]" becomes the unknown token's id (other reserved tokens written in text are split like any
    text), so a corpus that marks rare words that way keeps them as unknown words.

    Args:
        vocabulary: a list of tokens, or the path of a vocab.txt (see `load_vocabulary`).
        lowercase: bool. Lowercase text first; must match how the vocabulary was learned. Defaults to True.
        strip_accents: bool. Remove accents first. Defaults to True.
        sequence_length: int or None. Pad or cut the output to this many ids; None gives ragged output.

    Example:
    ```python
    tokenizer = wordpiece_tokenizer("data/wikitext2/vocab.txt")
    tokenizer(["The café"])              # [[174, 43, 5927, 219]]; a RaggedTensor inside tf.data or tf.function
    ```
    """
    if isinstance(vocabulary, (list, tuple)):
        _check_vocabulary(vocabulary, "vocabulary")
    else:
        vocabulary = load_vocabulary(vocabulary)
    return keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=list(vocabulary),
        sequence_length=sequence_length,
        lowercase=lowercase,
        strip_accents=strip_accents,
        oov_token="[UNK]",
        special_tokens=["[UNK]"],
        special_tokens_in_strings=True,
    )


def make_wikitext2_vocabulary(output, vocabulary_size=8192):
    """Learn the uncased WordPiece vocabulary of the shipped WikiText-2 train split, write it to `output` and return
    it; data/wikitext2/vocab.txt is `make_wikitext2_vocabulary("data/wikitext2/vocab.txt")` (about a minute)."""
    paragraphs = (p for document in wikitext_documents(wikitext2_file("train")) for p in document)
    vocabulary = learn_wordpiece_vocabulary(paragraphs, vocabulary_size)
    save_vocabulary(vocabulary, output)
    return vocabulary
