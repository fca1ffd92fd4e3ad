import hashlib
import io
import pathlib

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer

from kzoo.files import write_atomically

PAD, START, END, UNKNOWN = 0, 1, 2, 3


class _SharedSentencepieceModel(tf.saved_model.experimental.TrackableResource):
    """tf-text's SentencePiece model resource, created under a name derived from the model's content.

    tf-text creates the resource private to its op kernel (its TODO b/318839908), so in eager mode anything that
    clears TensorFlow's kernel cache, such as `tf.random.set_seed` or `keras.utils.set_random_seed`, deletes it and
    every later tokenize, in Python or in a traced function, fails with NotFoundError. A `shared_name` makes the
    resource outlive the kernel; deriving the name from the model's sha256 means only identical models share one.
    """

    def __init__(self, model_proto):
        super().__init__()
        self._model_proto = model_proto
        self._shared_name = "kzoo_sentencepiece_" + hashlib.sha256(model_proto).hexdigest()[:24]
        _ = self.resource_handle  # creates the resource

    def _create_resource(self):
        return gen_sentencepiece_tokenizer.sentencepiece_op(model=self._model_proto, shared_name=self._shared_name)


class SubwordTokenizer(tf.Module):
    """A SentencePiece subword tokenizer whose tokenize and detokenize are TensorFlow ops.

    The vocabulary is learned with the `sentencepiece` trainer (BPE by default) from training text only, and the
    learned model travels as one serialized proto: `save()` writes it, `load()` reads it, and a SavedModel that tracks
    the tokenizer carries it inside. Tokenizing and detokenizing run tensorflow-text's `SentencepieceTokenizer` ops,
    so they can live inside an exported graph, and detokenizing restores the original spacing exactly (SentencePiece
    marks word starts rather than splitting on spaces), so German output reads as normal text, umlauts and
    punctuation included. Byte fallback spells unseen characters as UTF-8 bytes instead of an unknown token.

    Ids 0-3 are reserved: 0 padding, 1 start of sequence, 2 end of sequence, 3 unknown.

    Args:
        model_proto: bytes. A serialized SentencePiece model, as `train` makes and `save` writes.

    Example:
    ```python
    from kzoo.text import SubwordTokenizer

    tokenizer = SubwordTokenizer.train(["Ein Hund läuft.", "Zwei Hunde laufen."], vocabulary_size=300)
    ids = tokenizer.tokenize(["Ein Hund."])        # RaggedTensor of int32 ids
    text = tokenizer.detokenize(ids)               # [b"Ein Hund."]
    ```

    References:
        - [Kudo & Richardson, 2018](https://arxiv.org/abs/1808.06226); [Sennrich et al., 2016](https://arxiv.org/abs/1508.07909).
    """

    def __init__(self, model_proto, name=None):
        super().__init__(name=name)
        self.model_proto = bytes(model_proto)
        self._tokenizer = tf_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32)
        self._tokenizer._model_resource = _SharedSentencepieceModel(self.model_proto)
        self.vocabulary_size = int(self._tokenizer.vocab_size())

    @classmethod
    def train(cls, sentences, vocabulary_size=8000, model_type="bpe", character_coverage=1.0):
        """Learn a vocabulary of `vocabulary_size` pieces from an iterable of sentences."""
        import sentencepiece

        if vocabulary_size < 300:
            raise ValueError(f"vocabulary_size={vocabulary_size} is too small; byte fallback alone needs 260 ids.")
        model = io.BytesIO()
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            vocab_size=vocabulary_size,
            model_type=model_type,
            character_coverage=character_coverage,
            pad_id=PAD,
            bos_id=START,
            eos_id=END,
            unk_id=UNKNOWN,
            byte_fallback=True,
            num_threads=1,
            minloglevel=2,
        )
        return cls(model.getvalue())

    @classmethod
    def load(cls, path):
        path = pathlib.Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: pass the .model file that SubwordTokenizer.save wrote.")
        return cls(path.read_bytes())

    def save(self, path):
        """Write the model proto to `path` atomically (a reader never sees half a file), readable as any file the
        user makes (the umask's permissions)."""
        write_atomically(path, self.model_proto)

    def pieces(self, ids):
        """The subword strings of a list of ids, for display (word starts are marked with ▁)."""
        return [p.decode("utf-8") for p in self._tokenizer.id_to_string(tf.constant(ids, tf.int32)).numpy()]

    def tokenize(self, texts):
        """Strings (batch,) to a RaggedTensor of ids (batch, None), without start or end ids."""
        return self._tokenizer.tokenize(texts)

    def sampler(self, dropout):
        """A tensorflow-text tokenizer that segments with BPE-dropout (Provilkov et al. 2020): each merge is skipped
        with probability `dropout`, so a word comes out in a different split each time (same text, more pieces on
        average). It is for training data only; `tokenize` is the segmentation a model translates with. SentencePiece
        draws the skips from its own random source, so the splits differ from run to run. (For a vocabulary trained
        with `model_type="unigram"` the same call samples Kudo's subword regularisation, `dropout` as its smoothing.)

        Example:
        ```python
        tokenizer = kzoo.text.SubwordTokenizer.train(["A dog runs.", "Ein Hund läuft."] * 20, vocabulary_size=300)
        ids = tokenizer.sampler(0.5).tokenize(tf.constant(["Ein Hund läuft."]))
        tokenizer.detokenize(ids).numpy()[0].decode()  # "Ein Hund läuft.", in (usually) more pieces
        ```

        References:
            - [Provilkov et al., 2020](https://arxiv.org/abs/1910.13267), BPE-Dropout: Simple and Effective Subword
              Regularization; [Kudo, 2018](https://arxiv.org/abs/1804.10959).
        """
        if not 0.0 < dropout < 1.0:
            raise ValueError(f"SubwordTokenizer.sampler: dropout={dropout!r} must lie strictly between 0 and 1 "
                             "(0 is the plain segmentation: use tokenize).")
        # For a BPE model SentencePiece reads alpha as the merge-dropout probability; nbest_size=-1 turns sampling on.
        return tf_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32, nbest_size=-1, alpha=dropout)

    def detokenize(self, ids):
        """Ids (batch, length), dense or ragged, to strings (batch,).

        Reads each row up to its first end id and drops padding and start ids, so a decoder's raw output can be
        passed as it is.
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD)
        ids = tf.convert_to_tensor(ids, tf.int32)
        ended = tf.cumsum(tf.cast(tf.equal(ids, END), tf.int32), axis=-1) > 0
        keep = tf.logical_not(ended) & tf.not_equal(ids, PAD) & tf.not_equal(ids, START)
        return self._tokenizer.detokenize(tf.ragged.boolean_mask(ids, keep))
