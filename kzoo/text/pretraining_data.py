"""BERT pretraining batches from plain-text documents: next-sentence pairs and dynamic masked-LM masks, via tf.data.

Devlin et al.'s recipe (google-research/bert, create_pretraining_data.py), in two stages:

- In Python, once per epoch: documents are streamed in blocks, split into sentences and tokenized; each document is
  cut into pairs of segments A and B. B is the text that follows A half of the time ("IsNext") and a stretch of
  another document of the block otherwise ("NotNext"). Each block's pairs are shuffled.
- In tf.data, once per batch: `BertPreprocessor.pack` packs `[CLS] A [SEP] B [SEP]` (the same packing that
  fine-tuning and the exports use), and 15% of the tokens are chosen for the masked-LM task with fresh randomness on
  every pass over the data.

References:
    - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805)
"""

import itertools
import random
import re

import numpy as np
import tensorflow as tf

from kzoo.text.sentences import split_sentences
from kzoo.text.wordpiece import RESERVED_TOKENS

IS_NEXT, NOT_NEXT = 0, 1  # NSP labels, as in Google's and Hugging Face's checkpoints
# Reserved and "[unusedN]" tokens: the tokenizer never produces them, so they are never random replacements either.
_BRACKETED = re.compile(r"\[\w+\]")


def _blocks(documents, size):
    """Lists of up to `size` consecutive documents."""
    documents = iter(documents)
    return iter(lambda: list(itertools.islice(documents, size)), [])


def _tokenized(block, tokenize):
    """The documents of a block as lists of sentences, each a non-empty int32 array of ids; empty documents dropped."""
    sentences = []
    for document in block:
        if isinstance(document, str):
            raise TypeError(
                f"documents_fn yielded the string {document[:40]!r}...; yield each document as a list of sentence "
                "or paragraph strings."
            )
        sentences.append([s for text in document for s in split_sentences(text)])
    ids = tokenize(tf.constant([s for document in sentences for s in document], tf.string))  # one call a block
    values, splits = ids.flat_values.numpy(), ids.row_splits.numpy()
    documents, row = [], 0
    for document in sentences:
        rows = [values[splits[i] : splits[i + 1]] for i in range(row, row + len(document))]
        row += len(document)
        rows = [sentence for sentence in rows if len(sentence)]
        if rows:
            documents.append(rows)
    return documents


def _truncate_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Cut the longer segment by one token, from its front or its back at random, until the pair fits."""
    a, b = [0, len(tokens_a)], [0, len(tokens_b)]  # [start, end) of what is kept
    while (a[1] - a[0]) + (b[1] - b[0]) > max_num_tokens:
        longer = a if a[1] - a[0] > b[1] - b[0] else b
        if rng.random() < 0.5:
            longer[0] += 1
        else:
            longer[1] -= 1
    return tokens_a[a[0] : a[1]], tokens_b[b[0] : b[1]]


def _document_pairs(documents, index, rng, max_num_tokens, short_seq_prob):
    """Yield (A, B, NSP label) from `documents[index]`, with random B segments from the other documents.

    create_instances_from_document of Google's recipe: sentences are gathered into a chunk until it reaches the
    target length (usually the full `max_num_tokens`, with probability `short_seq_prob` a random shorter one, drawn
    once per document); A is the chunk's first 1..n-1 sentences; B is the rest of the chunk, or (half of the time, and
    always for a one-sentence chunk) text from another document, and then the unused sentences of the chunk go back to
    start the next chunk.
    """
    document = documents[index]
    target_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_length = rng.randint(2, max_num_tokens)
    chunk, chunk_length, i = [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        if i == len(document) - 1 or chunk_length >= target_length:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = np.concatenate(chunk[:a_end])
            if len(chunk) == 1 or rng.random() < 0.5:
                label = NOT_NEXT
                other = rng.randrange(len(documents) - 1)
                other = documents[other + (other >= index)]  # never the document itself
                segments, length = [], 0
                for sentence in other[rng.randrange(len(other)) :]:
                    segments.append(sentence)
                    length += len(sentence)
                    if length >= target_length - len(tokens_a):
                        break
                i -= len(chunk) - a_end
            else:
                label = IS_NEXT
                segments = chunk[a_end:]
            yield *_truncate_pair(tokens_a, np.concatenate(segments), max_num_tokens, rng), label
            chunk, chunk_length = [], 0
        i += 1


def _sentence_pairs(documents, tokenize, rng, max_num_tokens, short_seq_prob, document_buffer):
    """Yield the shuffled (A, B, NSP label) pairs of each block of `document_buffer` documents.

    The random B segments of a block come from its other documents; a block of one document (the last one of a
    stream) borrows the block before it. At most two blocks are held at a time.
    """
    previous = []
    for block in _blocks(documents, document_buffer):
        block = _tokenized(block, tokenize)
        if not block:
            continue
        partners = (previous if len(block) == 1 else []) + block
        if len(partners) < 2:
            raise ValueError("documents_fn gave a single non-empty document: NotNext pairs need at least two.")
        offset = len(partners) - len(block)
        pairs = [
            pair
            for index in range(offset, len(partners))
            for pair in _document_pairs(partners, index, rng, max_num_tokens, short_seq_prob)
        ]
        rng.shuffle(pairs)
        yield from pairs
        previous = block


def _masked_lm(token_ids, seed, special_ids, continues_word, random_ids, mask_id, mask_rate, max_predictions):
    """Choose the masked-LM targets of a packed batch and corrupt them; randomness from the stateless `seed`.

    keras-hub's MaskedLMMaskGenerator would do the token-level case, but it draws with stateful random ops whose
    seeds are fixed when tf.data traces the map: after `keras.utils.set_random_seed` every epoch gets the same masks
    (static masking). Stateless ops seeded per batch give new masks each epoch and the same ones in every run.

    Words are drawn in random order and taken while their pieces fit in the budget of
    min(max_predictions, max(1, round(mask_rate * maskable tokens))), stopping at the first word that does not fit
    (Google's recipe skips it and tries the next). Each chosen token becomes [MASK] 80% of the time, a random token
    (never a reserved or [unusedN] one) 10% and stays 10%, decided per token also in whole-word mode, as Google's
    recipe does. A word is a piece and the "##" pieces after it where `continues_word` marks "##" ids; all False
    masks single tokens.
    """
    batch, length = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
    seeds = tf.random.experimental.stateless_split(seed, 3)
    maskable = tf.reduce_all(token_ids[:, :, None] != special_ids, axis=-1)  # (batch, seq)
    after_maskable = tf.pad(maskable[:, :-1], [[0, 0], [1, 0]])
    starts_word = ~(tf.gather(continues_word, token_ids) & maskable & after_maskable)
    word = tf.cumsum(tf.cast(starts_word, tf.int32), axis=1) - 1  # (batch, seq): word index of each token
    row_offset = tf.range(batch)[:, None] * length
    word_length = tf.reshape(  # (batch, seq): maskable pieces of each word index
        tf.math.unsorted_segment_sum(tf.cast(maskable, tf.int32), word + row_offset, batch * length), [batch, length]
    )
    maskable_count = tf.reduce_sum(tf.cast(maskable, tf.float32), axis=1)
    budget = tf.cast(tf.floor(mask_rate * maskable_count + 0.5), tf.int32)
    budget = tf.minimum(max_predictions, tf.maximum(1, budget))  # (batch,)

    keys = tf.where(word_length > 0, tf.random.stateless_uniform([batch, length], seeds[0]), 2.0)
    order = tf.argsort(keys, axis=1)  # (batch, seq): word indices, maskable words first in random order
    fits = tf.cumsum(tf.gather(word_length, order, batch_dims=1), axis=1) <= budget[:, None]
    word_chosen = tf.gather(fits, tf.argsort(order, axis=1), batch_dims=1)
    chosen = tf.gather(word_chosen, word, batch_dims=1) & maskable  # (batch, seq)

    draw = tf.random.stateless_uniform([batch, length], seeds[1])
    random_tokens = tf.gather(
        random_ids, tf.random.stateless_uniform([batch, length], seeds[2], maxval=len(random_ids), dtype=tf.int32)
    )
    corrupted = tf.where(draw < 0.8, mask_id, tf.where(draw < 0.9, random_tokens, token_ids))
    positions = tf.ragged.boolean_mask(tf.broadcast_to(tf.range(length), [batch, length]), chosen)
    return (
        tf.where(chosen, corrupted, token_ids),
        positions.to_tensor(shape=[None, max_predictions]),  # (batch, max_predictions), 0 in unused slots
        tf.ragged.boolean_mask(token_ids, chosen).to_tensor(shape=[None, max_predictions]),
        tf.sequence_mask(positions.row_lengths(), max_predictions, tf.float32),
    )


def masked_lm_rule(preprocessor, max_predictions=20, mask_rate=0.15, whole_word=False):
    """The masking of `pretraining_dataset` as a function `mask(token_ids, seed, epoch, batch_index)`.

    `pretraining_dataset` masks batch i of epoch e with `mask(token_ids, seed, e, i)`; called with the same packed
    token ids and numbers, it gives the same masks, so a caller can mask fixed pairs again as later epochs would
    (static masking, as Google's create_pretraining_data.py does with its dupe_factor). The randomness is stateless:
    the masks depend on (seed, epoch, batch_index) and on the batch's shape only.

    `mask` returns `(token_ids, masked_positions, targets, weights)`: the ids with the chosen tokens corrupted
    ((B, S) int32), their positions ascending ((B, P), 0 in unused slots), their original ids ((B, P), 0 in unused
    slots) and 1.0 for the used slots ((B, P) float32), P = max_predictions.

    Args:
        preprocessor: `kzoo.text.BertPreprocessor` whose vocabulary holds BERT's reserved tokens.
        max_predictions: int. Most masked-LM targets per example. Defaults to 20.
        mask_rate: float. Fraction of the non-special tokens chosen as targets. Defaults to 0.15.
        whole_word: bool. Choose whole words (a piece and its following "##" pieces). Defaults to False.

    Example:
    ```python
    preprocessor = kzoo.text.BertPreprocessor(kzoo.data.shipped_file("wikitext2/vocab.txt"), sequence_length=16)
    from kzoo.text.pretraining_data import masked_lm_rule

    mask = masked_lm_rule(preprocessor, max_predictions=3)
    packed = preprocessor.pack((tf.ragged.constant([[10, 11, 12, 13]]), tf.ragged.constant([[14, 15, 16]])))
    token_ids, positions, targets, weights = mask(packed["token_ids"], seed=0, epoch=0, batch_index=0)
    assert targets.shape == (1, 3) and float(tf.reduce_sum(weights)) == 1.0  # 15% of 7 tokens: one target
    ```
    """
    pad_id, _, cls_id, sep_id, mask_id = (preprocessor.token_to_id(token) for token in RESERVED_TOKENS)
    special_ids = tf.constant([pad_id, cls_id, sep_id])
    vocabulary = preprocessor.vocabulary
    continues_word = tf.constant([whole_word and token.startswith("##") for token in vocabulary])
    random_ids = tf.constant([i for i, token in enumerate(vocabulary) if not _BRACKETED.fullmatch(token)])

    def mask(token_ids, seed, epoch, batch_index):
        # The masks of batch i of epoch e depend on (seed, e, i) only: new every epoch, the same in every run.
        epoch_seed = tf.stack([tf.cast(seed, tf.int64), tf.cast(epoch, tf.int64)])
        mask_seed = tf.random.experimental.stateless_fold_in(epoch_seed, tf.cast(batch_index, tf.int64))
        return _masked_lm(
            token_ids, mask_seed, special_ids, continues_word, random_ids, mask_id, mask_rate, max_predictions
        )

    return mask


def pretraining_dataset(
    documents_fn,
    preprocessor,
    batch_size=32,
    max_predictions=20,
    mask_rate=0.15,
    whole_word=False,
    short_seq_prob=0.1,
    seed=0,
    document_buffer=256,
):
    """A `tf.data.Dataset` of BERT pretraining batches: masked-LM and next-sentence prediction.

    Every iteration over the dataset is one epoch: it calls `documents_fn` again, builds new sentence pairs with a
    `random.Random` seeded from (seed, epoch) and draws new masks with stateless ops seeded from (seed, epoch,
    batch), so runs repeat exactly, whatever the global seed, and no two epochs see the same masks. Documents are
    read `document_buffer` at a time, so memory stays bounded on a corpus larger than RAM.

    Sentences are tokenized, and pairs packed, by `preprocessor` (a `kzoo.text.BertPreprocessor`), so a backbone
    pretrained here reads text exactly as its fine-tuned classifier and its export will.

    Each element is `(features, labels, sample_weights)`, with B = batch_size, S = the preprocessor's
    sequence_length and P = max_predictions:
        features: {"token_ids": (B, S) `[CLS] A [SEP] B [SEP]` then padding, chosen tokens corrupted;
            "segment_ids": (B, S) 0 for [CLS], A and its [SEP], 1 for B and its [SEP], 0 for padding;
            "padding_mask": (B, S) 1 for real tokens; "masked_positions": (B, P) positions of the chosen tokens,
            ascending, 0 in unused slots}, all int32.
        labels: {"mlm": (B, P) int32 original ids of the chosen tokens, 0 in unused slots;
            "nsp": (B,) int32, 0 = B follows A ("IsNext"), 1 = B is from another document ("NotNext")}.
        sample_weights: {"mlm": (B, P) float32 1.0 for used slots; "nsp": (B,) float32 ones}.
    The last batch of an epoch may be smaller. A little over half of the pairs are NotNext (53-58% on WikiText-2),
    as in Google's recipe: a chunk of one sentence can only be paired with another document.

    Args:
        documents_fn: a function of no arguments that returns a fresh iterable of documents, each a list of
            sentence or paragraph strings (paragraphs are split with `split_sentences`), e.g.
            `lambda: wikitext_documents(path)`.
        preprocessor: `kzoo.text.BertPreprocessor` whose vocabulary holds BERT's reserved tokens. Its
            `sequence_length` is the tokens per example, [CLS] and [SEP]s included.
        batch_size: int. Examples per batch. Defaults to 32.
        max_predictions: int. Most masked-LM targets per example. Defaults to 20.
        mask_rate: float. Fraction of the non-special tokens chosen as targets. Defaults to 0.15.
        whole_word: bool. Choose whole words (a piece and its following "##" pieces) instead of single pieces.
            Defaults to False.
        short_seq_prob: float. Probability that a document's pairs aim at a random length shorter than
            `sequence_length`, so that the model also sees short inputs. Defaults to 0.1.
        seed: int. Seed of the pairs and of the masks. Defaults to 0.
        document_buffer: int. Documents tokenized, paired and shuffled together; random B segments come from the
            same block. Defaults to 256.

    Example:
    ```python
    documents = [["The cat sat on the mat.", "It purred."], ["Dogs bark at night.", "The moon rose."]] * 4
    preprocessor = kzoo.text.BertPreprocessor(kzoo.data.shipped_file("wikitext2/vocab.txt"), sequence_length=16)
    dataset = kzoo.text.pretraining_dataset(lambda: documents, preprocessor, batch_size=4, max_predictions=3)
    features, labels, sample_weights = next(iter(dataset))
    assert features["token_ids"].shape == (4, 16) and labels["mlm"].shape == (4, 3)
    ```
    """
    if not callable(documents_fn):
        raise TypeError(
            f"documents_fn={documents_fn!r} is not callable; pass a function that returns a fresh iterable of "
            "documents, e.g. lambda: wikitext_documents(path)."
        )
    sequence_length = preprocessor.sequence_length
    if sequence_length < 5:
        raise ValueError(f"sequence_length={sequence_length} cannot hold [CLS] A [SEP] B [SEP]; use at least 5.")
    if not 1 <= max_predictions <= sequence_length - 3:
        raise ValueError(
            f"max_predictions={max_predictions} must be between 1 and sequence_length - 3 = {sequence_length - 3}."
        )
    if not 0 < mask_rate <= 1 or not 0 <= short_seq_prob <= 1:
        raise ValueError(f"mask_rate={mask_rate} must be in (0, 1] and short_seq_prob={short_seq_prob} in [0, 1].")
    if document_buffer < 2:
        raise ValueError(f"document_buffer={document_buffer} is too small: NotNext pairs need at least two documents.")
    mask = masked_lm_rule(preprocessor, max_predictions, mask_rate, whole_word)
    tokenize = tf.function(preprocessor.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    epochs = itertools.count()

    def epoch_pairs():
        epoch = next(epochs)
        rng = random.Random(f"kzoo-nsp/{seed}/{epoch}")
        pairs = _sentence_pairs(documents_fn(), tokenize, rng, sequence_length - 3, short_seq_prob, document_buffer)
        for pair in pairs:
            yield *pair, epoch

    def example(pairs, batch_index):
        segments_a, segments_b, nsp, epoch = pairs
        packed = preprocessor.pack((segments_a, segments_b))
        token_ids, segment_ids = packed["token_ids"], packed["segment_ids"]
        masked_ids, positions, targets, weights = mask(token_ids, seed, epoch[0], batch_index)
        features = {
            "token_ids": masked_ids,
            "segment_ids": segment_ids,
            "padding_mask": packed["padding_mask"],
            "masked_positions": positions,
        }
        return features, {"mlm": targets, "nsp": nsp}, {"mlm": weights, "nsp": tf.ones_like(nsp, tf.float32)}

    segment = tf.TensorSpec([None], tf.int32)
    pairs = tf.data.Dataset.from_generator(
        epoch_pairs, output_signature=(segment, segment, tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int64))
    )
    batches = tf.data.Dataset.zip(pairs.ragged_batch(batch_size), tf.data.Dataset.counter())
    return batches.map(example, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
