"""The Multi30k translation part of benchmarks/gpu_jax.py, in three steps across two machines.

- `export` (here, TensorFlow): the recipe's joint SentencePiece vocabulary (`kzoo.text.SubwordTokenizer`) learned from
  Multi30k train, and the recipe's length-bucketed batches (`kzoo.text.translation_batches`, one shuffled pass over
  train, val in order) as token ids in one compressed .npz, with the tokenizer beside it.
- `train` (the GPU, JAX, no TensorFlow): kzoo's Transformer as the recipe builds and compiles it
  (`build_model`, `compile_model`: transformer_small, label-smoothed `MaskedCrossEntropy`, `TransformerSchedule`,
  Adam(0.9, 0.98, 1e-9), `MaskedAccuracy`) fitted on those batches under `TimeBudget`, then greedy decoding of the
  val sources with the model's backend-free `encode` / `initial_cache` / `decode_step`, written as ids.
- `score` (here, TensorFlow): the ids detokenized with the exported tokenizer and scored (BLEU, chrF) against the
  val references.
"""

import json
import pathlib
import time

import keras
import numpy as np

from kzoo.files import atomic_path

TOKENIZER = "tokenizer.model"
SMOKE_SETTINGS = dict(vocabulary_size=500, encoder_layers=1, decoder_layers=1, hidden_dim=32, num_heads=2,
                      intermediate_dim=64, max_tokens=256, max_length=24, warmup_steps=20)
SMOKE_PAIRS = {"train": 400, "val": 16}  # sentence pairs kept in --smoke


def recipe_config(smoke):
    """The translation recipe's `TranslationConfig`: its defaults, or tiny sizes with --smoke."""
    from kzoo.train.translation_recipe import TranslationConfig

    return TranslationConfig(**(SMOKE_SETTINGS if smoke else {}))


def _save_npz(path, arrays):
    with atomic_path(path) as temporary, open(temporary, "wb") as file:
        np.savez_compressed(file, **arrays)
    return path


# === export (TensorFlow) ===


def export(path, smoke=False):
    """Write the pre-tokenized Multi30k batches to `path` (.npz) and the tokenizer beside it; returns a summary."""
    import tensorflow as tf

    from kzoo.data import multi30k
    from kzoo.text import SubwordTokenizer, encode_pairs, translation_batches
    from kzoo.text.subword_tokenizer import END, PAD, START
    from kzoo.text.translation_data import DEFAULT_BOUNDARIES

    path = pathlib.Path(path)
    config = recipe_config(smoke)
    splits = {split: multi30k(split) for split in ("train", "val")}
    if smoke:
        splits = {split: (sources[:SMOKE_PAIRS[split]], targets[:SMOKE_PAIRS[split]])
                  for split, (sources, targets) in splits.items()}
    train_sources, train_targets = splits["train"]
    tokenizer = SubwordTokenizer.train(train_sources + train_targets, vocabulary_size=config.vocabulary_size)
    with atomic_path(path.parent / TOKENIZER) as temporary:
        tokenizer.save(temporary)
    arrays = {}
    for split, shuffle in (("train", True), ("val", False)):
        batches = translation_batches(tokenizer, *splits[split], max_tokens=config.max_tokens,
                                      max_length=config.max_length, shuffle=shuffle, seed=config.seed)
        for i, (inputs, labels) in enumerate(batches):
            arrays[f"{split}_{i}_encoder"] = inputs["encoder_token_ids"].numpy().astype(np.int16)
            arrays[f"{split}_{i}_decoder"] = inputs["decoder_token_ids"].numpy().astype(np.int16)
            arrays[f"{split}_{i}_labels"] = labels.numpy().astype(np.int16)
    source_ids = encode_pairs(tokenizer, *splits["val"], config.max_length)[0]
    arrays["val_sources"] = source_ids.to_tensor(default_value=0).numpy().astype(np.int16)
    boundaries = [b for b in DEFAULT_BOUNDARIES if b < config.max_length] + [config.max_length + 1]
    arrays["boundaries"] = np.array(boundaries, np.int32)
    arrays["batch_sizes"] = np.array([max(1, config.max_tokens // b) for b in boundaries], np.int32)
    meta = {"smoke": smoke, "vocabulary_size": int(tokenizer.vocabulary_size), "pad": PAD, "start": START, "end": END,
            "pairs": {split: len(pairs[0]) for split, pairs in splits.items()}, "tensorflow": tf.__version__}
    arrays["meta"] = np.array(json.dumps(meta))
    _save_npz(path, arrays)
    train_batches = sum(1 for key in arrays if key.startswith("train_") and key.endswith("_encoder"))
    return {**meta, "bytes": path.stat().st_size, "train_batches": train_batches}


# === train and decode (JAX on the GPU) ===


def load(path):
    """(meta, {split: [(inputs, labels)]}, val source ids, boundaries, batch sizes) from an exported .npz."""
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
        batches = {}
        for split in ("train", "val"):
            count = sum(1 for key in data.files if key.startswith(f"{split}_") and key.endswith("_encoder"))
            batches[split] = [
                ({"encoder_token_ids": data[f"{split}_{i}_encoder"].astype(np.int32),
                  "decoder_token_ids": data[f"{split}_{i}_decoder"].astype(np.int32)},
                 data[f"{split}_{i}_labels"].astype(np.int32))
                for i in range(count)
            ]
        return meta, batches, data["val_sources"].astype(np.int32), data["boundaries"], data["batch_sizes"]


def padded_to_bucket(batch, boundaries, batch_sizes):
    """A batch padded (with 0, which the loss and metric ignore) to its bucket's length and batch size, so that the
    compiled training step sees one shape per bucket instead of one per batch."""
    inputs, labels = batch
    length = max(inputs["encoder_token_ids"].shape[1], inputs["decoder_token_ids"].shape[1])
    bucket = int(np.searchsorted(boundaries, length, side="right"))
    bucket = min(bucket, len(boundaries) - 1)
    width, rows = int(boundaries[bucket]), max(int(batch_sizes[bucket]), labels.shape[0])

    def pad(ids):
        return np.pad(ids, [(0, rows - ids.shape[0]), (0, width - ids.shape[1])])

    return {name: pad(ids) for name, ids in inputs.items()}, pad(labels)


def real_tokens(batches):
    """Source plus target tokens that are not padding."""
    return sum(int(np.count_nonzero(x["encoder_token_ids"]) + np.count_nonzero(y)) for x, y in batches)


def greedy_decode(model, source_ids, max_length, start, end, pad):
    """Greedy ids (batch, max_length), `pad` after each sentence's `end` id, through the model's cached decoding
    methods; each step is one compiled JAX function."""
    import jax
    import jax.numpy as jnp

    u, mask = model.encode(jnp.asarray(source_ids))
    cache = model.initial_cache(u, max_length)
    step = jax.jit(lambda token, index, cache, mask: model.decode_step(token[:, None], index, cache, mask))
    token = jnp.full((source_ids.shape[0],), start, jnp.int32)
    finished = jnp.zeros((source_ids.shape[0],), bool)
    output = []
    for index in range(max_length):
        logits, cache = step(token, jnp.int32(index), cache, mask)
        logits = logits[:, 0]
        if index == max_length - 1:  # the last position may only end the sentence
            logits = jnp.where(jnp.arange(logits.shape[-1]) == end, 0.0, -jnp.inf)
        token = jnp.where(finished, pad, jnp.argmax(logits, axis=-1).astype(jnp.int32))
        finished = finished | (token == end)
        output.append(token)
        if bool(finished.all()):
            break
    ids = np.stack([np.asarray(t) for t in output], axis=1)
    return np.pad(ids, [(0, 0), (0, max_length - ids.shape[1])])


def train(path, minutes, ids_path, smoke=False):
    """Fit the recipe's Transformer on the exported batches for at most `minutes`, greedy-decode the val sources
    into `ids_path`, and return (rows per epoch, summary)."""
    from kzoo.train.callbacks import TimeBudget
    from kzoo.train.translation_recipe import build_model, compile_model

    meta, batches, val_sources, boundaries, batch_sizes = load(path)
    if meta["smoke"] != smoke:
        raise ValueError(f"{path} was exported with smoke={meta['smoke']}, but this run has smoke={smoke}: export "
                         "again with the same --smoke setting.")
    config = recipe_config(smoke)
    keras.utils.set_random_seed(config.seed)
    train_batches = [padded_to_bucket(b, boundaries, batch_sizes) for b in batches["train"]]
    val_batches = [padded_to_bucket(b, boundaries, batch_sizes) for b in batches["val"]]
    model = build_model(config, meta["vocabulary_size"])
    compile_model(model, config)
    rng = np.random.default_rng(config.seed)

    def forever(items, shuffle):
        while True:
            yield from (items[i] for i in (rng.permutation(len(items)) if shuffle else range(len(items))))

    clock = EpochClock()
    tokens_per_step = real_tokens(batches["train"]) / len(batches["train"])
    budget = TimeBudget(minutes)
    started = time.monotonic()
    history = model.fit(forever(train_batches, True), steps_per_epoch=len(train_batches), epochs=config.epochs,
                        validation_data=forever(val_batches, False), validation_steps=len(val_batches), verbose=2,
                        callbacks=[clock, budget])
    train_seconds = time.monotonic() - started
    rows = [{"epoch": i + 1, **{key: float(values[i]) for key, values in history.history.items()},
             "steps": clock.steps[i], "seconds": clock.seconds[i],
             "tokens_per_second": clock.steps[i] * tokens_per_step / clock.seconds[i]}
            for i in range(len(clock.seconds))]
    decode_started = time.monotonic()
    ids = greedy_decode(model, val_sources, config.max_length, meta["start"], meta["end"], meta["pad"])
    decode_seconds = time.monotonic() - decode_started
    _save_npz(ids_path, {"ids": ids.astype(np.int16), "meta": np.array(json.dumps(meta))})
    summary = {"parameters": model.count_params(), "steps_per_epoch": len(train_batches),
               "steps": int(model.optimizer.iterations), "train_seconds": train_seconds,
               "decode_seconds": decode_seconds, "sentences": int(ids.shape[0]),
               "ended": int(np.any(ids == meta["end"], axis=1).sum()), "config": config, "meta": meta}
    return rows, summary


class EpochClock(keras.callbacks.Callback):
    """Seconds and steps of each epoch's training (validation left out): from the epoch's start to its validation,
    or to its end where a time budget cut it before validation."""

    def __init__(self):
        super().__init__()
        self.seconds, self.steps, self._start = [], [], None

    def on_epoch_begin(self, epoch, logs=None):
        self._start, self._steps = time.monotonic(), 0

    def on_train_batch_end(self, batch, logs=None):
        self._steps += 1

    def on_test_begin(self, logs=None):
        self._stop()

    def on_epoch_end(self, epoch, logs=None):
        self._stop()

    def _stop(self):
        if self._start is not None:
            self.seconds.append(time.monotonic() - self._start)
            self.steps.append(self._steps)
            self._start = None


# === score (TensorFlow) ===


def score(data_path, ids_path):
    """BLEU and chrF of the decoded ids against the val references, and three sample translations."""
    from kzoo.data import multi30k
    from kzoo.text import SubwordTokenizer
    from kzoo.train.quality import translation_scores

    with np.load(ids_path) as data:
        ids, meta = data["ids"].astype(np.int32), json.loads(str(data["meta"]))
    tokenizer = SubwordTokenizer.load(pathlib.Path(data_path).parent / TOKENIZER)
    if tokenizer.vocabulary_size != meta["vocabulary_size"]:
        raise ValueError(f"{ids_path} was decoded with a {meta['vocabulary_size']}-piece vocabulary, but "
                         f"{data_path}'s tokenizer has {tokenizer.vocabulary_size}: score the ids with their export.")
    sources, references = (side[: meta["pairs"]["val"]] for side in multi30k("val"))
    hypotheses = [text.decode("utf-8") for text in tokenizer.detokenize(ids).numpy()]
    return translation_scores(hypotheses, references), list(zip(sources[:3], hypotheses[:3], references[:3]))
