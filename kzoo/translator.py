"""Strings in, strings out: a trained Transformer and its tokenizer, decoding inside compiled TensorFlow functions."""

import tensorflow as tf

from kzoo.decoding import beam_search, generate, greedy, sampler
from kzoo.text import END, PAD

METHODS = ("beam", "greedy", "sample")


class Translator(tf.Module):
    """Translate sentences with a `Transformer` and the `SubwordTokenizer` it was trained with.

    `translate_tensor` is the whole path as TensorFlow ops (tokenize, cut overlong input, decode, detokenize), so the
    same function runs from Python and inside an exported SavedModel. Overlong sentences are cut to
    `max_source_length` tokens, never refused; an empty sentence gives an (often empty) string.

    Args:
        model: a trained `kzoo.models.Transformer`.
        tokenizer: the `kzoo.text.SubwordTokenizer` of its training data (source and target share it).
        method: "beam" (default), "greedy" or "sample".
        beam_size: int. Hypotheses kept by beam search. Defaults to 4.
        length_penalty: float. Beam search's length penalty α. Defaults to 0.6.
        max_source_length: int. Source tokens kept, end token included. Defaults to 128.
        max_output_factor: float. At most `max_output_factor · source length + 10` output tokens. Defaults to 1.5.
        sampling: dict of `kzoo.decoding.sampler` arguments (temperature, top_k, top_p, seed) for "sample".

    Example:
    ```python
    translator = Translator(model, tokenizer)
    translator(["A dog runs on the beach."])  # ["Ein Hund läuft am Strand."]
    ```
    """

    def __init__(self, model, tokenizer, method="beam", beam_size=4, length_penalty=0.6, max_source_length=128,
                 max_output_factor=1.5, sampling=None, name=None):
        super().__init__(name=name)
        if method not in METHODS:
            raise ValueError(f"method={method!r} is not a decoding method; use one of {METHODS}.")
        self.model = model
        self.tokenizer = tokenizer
        self.method = method
        self.beam_size = beam_size
        self.length_penalty = length_penalty
        self.max_source_length = max_source_length
        self.max_output_factor = max_output_factor
        self.sampling = dict(sampling or {})
        self._compiled = tf.function(self.translate_tensor, input_signature=[tf.TensorSpec([None], tf.string)])

    def source_ids(self, texts):
        """Strings (batch,) to padded source ids (batch, m): the tokens, cut to fit, then the end token."""
        ids = self.tokenizer.tokenize(texts)[:, : self.max_source_length - 1]
        ends = tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], END))
        return tf.concat([ids, ends], axis=1).to_tensor(default_value=PAD)

    def translate_tensor(self, texts):
        """Strings (batch,) to translated strings (batch,), as TensorFlow ops."""
        texts = tf.ensure_shape(tf.convert_to_tensor(texts, tf.string), [None])
        encoder_token_ids = self.source_ids(texts)
        source_lengths = tf.reduce_sum(tf.cast(tf.not_equal(encoder_token_ids, PAD), tf.float32), axis=1)
        max_length = tf.cast(self.max_output_factor * source_lengths, tf.int32) + 10  # one limit per sentence
        if self.method == "beam":
            ids = beam_search(self.model, encoder_token_ids, max_length, self.beam_size, self.length_penalty)
        else:
            pick = greedy() if self.method == "greedy" else sampler(**self.sampling)
            ids = generate(self.model, encoder_token_ids, max_length, pick)
        return self.tokenizer.detokenize(ids)

    def __call__(self, texts):
        """A list of strings to a list of strings."""
        texts = list(texts)
        if not texts:
            return []
        return [t.decode("utf-8") for t in self._compiled(tf.constant(texts, tf.string)).numpy()]

    def translate(self, texts, batch_size=64):
        """Translate many sentences, `batch_size` at a time, sorted by length so batches pad little."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        results = [None] * len(texts)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            for i, translation in zip(chunk, self([texts[i] for i in chunk])):
                results[i] = translation
        return results
