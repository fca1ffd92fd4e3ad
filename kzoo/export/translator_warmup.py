"""The warm-up requests of a translator whose small sub-batches decode compiled by XLA: one request per compiled
shape, so that TF Serving compiles them all when it loads the version (replaying assets.extra/
tf_serving_warmup_requests) instead of on a user's first request of each shape."""

from kzoo.decoding.fixed_shape_beam_search import SOURCE_BUCKETS, sentence_buckets
from kzoo.serving.warmup import tfrecords
from kzoo.serving.wire_format import predict_request, prediction_log

WORDS = ("a", "the", "and", "dog", "man", "in")  # tried in turn for a word that is one subword however repeated


def warmup_batches(translator):
    """Batches of text (lists of str) that reach every shape the translator's compiled beam search takes: for each
    bucket of sentences (1, 2, 4, ... `jit_max_sentences`) and each source bucket up to `max_source_length`, that
    many copies of a sentence whose tokens fill the bucket (a word repeated), times the translator's `lanes` (each
    lane then decodes exactly a bucket's sentences). [] when nothing is compiled.

    Example:
    ```python
    from kzoo.export.translator_warmup import warmup_batches
    from kzoo.translator import Translator

    shipped = Translator.load(kzoo.data.shipped_model("transformer_multi30k_en_de"), jit_max_sentences=2, lanes=1)
    batches = warmup_batches(shipped)  # 1 and 2 sentences of 16, 32, 64 and 128 source tokens
    assert [len(batch) for batch in batches] == [1, 1, 1, 1, 2, 2, 2, 2] and batches[4][0].count(" ") == 14
    two_lanes = Translator.load(kzoo.data.shipped_model("transformer_multi30k_en_de"), jit_max_sentences=2, lanes=2)
    assert [len(batch) for batch in warmup_batches(two_lanes)][::4] == [2, 4]  # a bucket's sentences in each lane
    ```
    """
    if translator.method != "beam" or not translator.jit_max_sentences:
        return []
    lengths = [m for m in SOURCE_BUCKETS if m < translator.max_source_length] + [translator.max_source_length]
    texts = _filling_texts(translator, lengths)
    return [[text] * (size * translator.lanes) for size in sentence_buckets(translator.jit_max_sentences)
            for text in texts]


def _filling_texts(translator, lengths):
    """One text per length of `lengths` (source tokens, the end token included, as `source_ids` counts them): a
    word of `WORDS` repeated, the first whose repeats give exactly those lengths."""
    import tensorflow as tf

    from kzoo.text import PAD

    for word in WORDS:
        texts = [" ".join([word] * (m - 1)) for m in lengths]
        ids = translator.source_ids(tf.constant(texts))
        if tf.reduce_sum(tf.cast(tf.not_equal(ids, PAD), tf.int32), axis=1).numpy().tolist() == lengths:
            return texts
    raise ValueError(f"none of {WORDS}, repeated, tokenizes to the source lengths {lengths} (one subword a word): "
                     "the warm-up requests cannot be made (export with jit_max_sentences=0).")


def warmup_file(translator):
    """The bytes of assets.extra/tf_serving_warmup_requests: one `serving_default` Predict request (input `text`)
    per batch of `warmup_batches`, as PredictionLog records in a TFRecord file.

    Example:
    ```python
    from kzoo.export.translator_warmup import warmup_file
    from kzoo.serving.warmup import read_tfrecords
    from kzoo.translator import Translator

    shipped = Translator.load(kzoo.data.shipped_model("transformer_multi30k_en_de"), jit_max_sentences=4)
    assert len(read_tfrecords(warmup_file(shipped))) == 3 * 4  # 1, 2 or 4 sentences x 4 source buckets
    ```
    """
    return tfrecords([prediction_log(predict_request({"text": ("string", [len(batch)],
                                                                [t.encode("utf-8") for t in batch])}))
                      for batch in warmup_batches(translator)])
