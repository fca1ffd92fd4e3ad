"""Pretrain the ablation's small BERT on a borrowed accelerator that has no TensorFlow, with Keras's JAX backend.

The CPU recipe (`python -m kzoo.train.bert_pretraining_recipe`) makes about 5,000 tokens/s here: two hours give a
`bert_mini` about 7,000 steps of 32 × 128 tokens, and in those its masked-LM loss stays on the unigram plateau
(benchmarks/RESULTS.md, bert-ablation). A GPU does that many steps in a minute, but the machine lent to this project
carries PyTorch and JAX, not TensorFlow, and accepts 64 MiB of files. So the run is split in three:

1. `export` (here, TensorFlow): kzoo's own pipeline (`kzoo.text.pretraining_dataset`, exactly as the recipe calls
   it, fresh masks every pass over the corpus) writes its batches to compact .npz shards: token ids, segment ids,
   masked positions, masked-LM labels and next-sentence labels. Padding masks and masked-LM weights are implied
   (token id 0 is [PAD], never a label).
2. `train` (on the accelerator, `KERAS_BACKEND=jax`): the same `BertPretrainer` of `kzoo.models`, built and compiled
   as the recipe builds it (AdamW, weight decay 0.01, warm-up then linear decay, plus BERT's clipping of the global
   gradient norm at 1), trains on those pairs for a time budget and writes its weights as .npz parts small enough
   to come back. The shards hold a few passes' worth of pairs, and the run makes many more passes, so every pass
   draws new masks (`remask`: kzoo's token-level rule transcribed to numpy, checked against kzoo's own masks at
   export) instead of repeating the exported ones.
3. `import` (here, TensorFlow): the weights go into the TensorFlow-built pretrainer, which is evaluated on the same
   validation batches (its losses must equal the accelerator's) and written as a run folder of the CPU recipe's
   shape (backbone.keras, config.json, scores.json, history.csv), which `benchmarks/bert_ablation.py` reads.

Usage:
    .venv/bin/python benchmarks/bert_pretraining_accelerator.py export --output shards/ --train-batches 6000
    KERAS_BACKEND=jax python3 benchmarks/bert_pretraining_accelerator.py train --shards shards/ --output $OUT \\
        --minutes 7 --batch-size 128 --learning-rate 5e-4
    .venv/bin/python benchmarks/bert_pretraining_accelerator.py import --shards shards/ --weights OUT/ \\
        --output runs/bert_wikitext2_gpu
"""

import argparse
import dataclasses
import glob
import json
import os
import pathlib
import re
import sys
import time

import keras  # set KERAS_BACKEND before this runs: the train step uses "jax" where TensorFlow is absent
import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
FIELDS = ("token_ids", "segment_ids", "masked_positions", "mlm", "nsp")
DTYPES = {"token_ids": np.uint16, "segment_ids": np.uint8, "masked_positions": np.uint8, "mlm": np.uint16,
          "nsp": np.uint8}
PART_BYTES = 15 * 2**20  # files coming back from the accelerator must stay under 16 MiB each


# === 1. export (TensorFlow) ===


def export(output, train_batches, validation_batches, shard_batches):
    from kzoo.train import bert_pretraining_recipe as recipe

    config = recipe.PretrainingConfig()
    preprocessor = recipe.text_preprocessor(config)
    vocabulary = preprocessor.vocabulary
    if len(vocabulary) > np.iinfo(np.uint16).max or config.sequence_length > np.iinfo(np.uint8).max:
        raise ValueError("the shards store token ids as uint16 and positions as uint8: the configuration is too big.")
    output = pathlib.Path(output)
    output.mkdir(parents=True, exist_ok=True)
    splits = {
        "train": (recipe.pretraining_batches(config, preprocessor, recipe.wikitext_articles("train"), config.seed),
                  train_batches),
        "valid": (recipe.pretraining_batches(config, preprocessor, recipe.wikitext_articles("valid"), config.seed + 1),
                  validation_batches),  # the recipe's validation set: the same seed, pairs and masks
    }
    for split, (dataset, count) in splits.items():
        dataset = dataset.repeat() if split == "train" else dataset  # each pass over the corpus draws new masks
        rows, shard = {name: [] for name in FIELDS}, 0
        for index, (features, labels, _) in enumerate(dataset.take(count)):
            for name in FIELDS:
                source = labels if name in ("mlm", "nsp") else features
                rows[name].append(source[name].numpy().astype(DTYPES[name]))
            if (index + 1) % shard_batches == 0 or index + 1 == count:
                _write_npz(output / f"{split}_{shard:03d}.npz", {k: np.concatenate(v) for k, v in rows.items()})
                rows, shard = {name: [] for name in FIELDS}, shard + 1
        print(f"{split}: {count} batches in {shard} shards", flush=True)
    (output / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")


def _write_npz(path, arrays):
    partial = path.with_name(path.name + ".partial")  # never leave a half-written shard under its real name
    with open(partial, "wb") as file:
        np.savez_compressed(file, **arrays)
    os.replace(partial, path)


def load_split(shards, split):
    """Features, labels and sample weights of every shard of `split`, as the recipe's pipeline gives them."""
    parts = [np.load(path) for path in sorted(glob.glob(str(pathlib.Path(shards) / f"{split}_*.npz")))]
    if not parts:
        raise FileNotFoundError(f"no {split}_*.npz shards in {shards}: run the export step first.")
    arrays = {name: np.concatenate([part[name] for part in parts]).astype(np.int32) for name in FIELDS}
    features = {name: arrays[name] for name in ("token_ids", "segment_ids", "masked_positions")}
    features["padding_mask"] = (arrays["token_ids"] != 0).astype(np.int32)  # [PAD] is id 0
    labels = {"mlm": arrays["mlm"], "nsp": arrays["nsp"]}
    weights = {"mlm": (arrays["mlm"] != 0).astype(np.float32), "nsp": np.ones(len(arrays["nsp"]), np.float32)}
    return features, labels, weights


def original_tokens(features, labels):
    """Token ids before masking: the masked-LM labels written back at their positions."""
    tokens = features["token_ids"].copy()
    rows = np.arange(len(tokens))[:, None]
    real = labels["mlm"] != 0
    tokens[np.broadcast_to(rows, real.shape)[real], features["masked_positions"][real]] = labels["mlm"][real]
    return tokens


def random_ids(tokens):
    """Ids a random replacement may take: every token but the reserved and [unusedN] ones, as kzoo's pipeline."""
    return np.array([i for i, token in enumerate(tokens) if not re.fullmatch(r"\[\w+\]", token)], np.int32)


def remask(tokens, rng, replacement_ids, mask_rate=0.15, max_predictions=20, special_ids=(0, 2, 3), mask_id=4):
    """kzoo's token-level masked-LM rule (`kzoo.text.pretraining_data._masked_lm`) in numpy: per row, a budget of
    min(max_predictions, max(1, round(mask_rate × maskable tokens))) positions drawn uniformly among the
    non-special tokens; each becomes [MASK] 80%, a random token 10%, itself 10%. Returns token ids, ascending
    positions (0 in unused slots), labels (0 in unused slots)."""
    batch, length = tokens.shape
    maskable = ~np.isin(tokens, special_ids)
    budget = np.minimum(max_predictions, np.maximum(1, np.floor(mask_rate * maskable.sum(1) + 0.5))).astype(int)
    keys = np.where(maskable, rng.random((batch, length)), 2.0)
    rank = np.argsort(np.argsort(keys, axis=1), axis=1)
    chosen = maskable & (rank < budget[:, None])
    draw = rng.random((batch, length))
    replacements = replacement_ids[rng.integers(0, len(replacement_ids), (batch, length))]
    corrupted = np.where(draw < 0.8, mask_id, np.where(draw < 0.9, replacements, tokens))
    positions = np.sort(np.where(chosen, np.arange(length), length), axis=1)[:, :max_predictions]
    valid = positions < length
    positions = np.where(valid, positions, 0)
    labels = np.where(valid, np.take_along_axis(tokens, positions, 1), 0)
    return np.where(chosen, corrupted, tokens).astype(np.int32), positions.astype(np.int32), labels.astype(np.int32)


def check_remask(features, labels, replacement_ids):
    """`remask` must give every row as many targets as kzoo's pipeline gave it, and the same 80/10/10 split."""
    tokens = original_tokens(features, labels)
    token_ids, positions, targets = remask(tokens, np.random.default_rng(0), replacement_ids)
    kzoo_counts, our_counts = (labels["mlm"] != 0).sum(1), (targets != 0).sum(1)
    if not np.array_equal(kzoo_counts, our_counts):
        raise AssertionError(f"remask chose {our_counts[:8]}... targets per row, kzoo's pipeline {kzoo_counts[:8]}...")

    def split(ids, places, answers):
        shown = np.take_along_axis(ids, places, 1)[answers != 0]
        return np.mean(shown == 4), np.mean(shown == answers[answers != 0])

    print("[MASK] / unchanged fractions of the targets: kzoo %.3f / %.3f, remask %.3f / %.3f"
          % (*split(features["token_ids"], features["masked_positions"], labels["mlm"]),
             *split(token_ids, positions, targets)), flush=True)


class RemaskedPairs(keras.utils.PyDataset):
    """Batches of the exported pairs in a new order and with new masks every epoch (seeded by seed, epoch, batch)."""

    def __init__(self, features, labels, batch_size, replacement_ids, seed, **kwargs):
        super().__init__(**kwargs)
        self.tokens = original_tokens(features, labels)
        self.segment_ids = features["segment_ids"]
        self.next_sentence = labels["nsp"]
        self.batch_size, self.replacement_ids, self.seed = batch_size, replacement_ids, seed
        self.epoch = 0
        self.order = np.random.default_rng([seed, 0]).permutation(len(self.tokens))

    def __len__(self):
        return len(self.tokens) // self.batch_size

    def on_epoch_end(self):
        self.epoch += 1
        self.order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.tokens))

    def __getitem__(self, index):
        rows = self.order[index * self.batch_size:(index + 1) * self.batch_size]
        rng = np.random.default_rng([self.seed, self.epoch, index])
        token_ids, positions, targets = remask(self.tokens[rows], rng, self.replacement_ids)
        features = {"token_ids": token_ids, "segment_ids": self.segment_ids[rows],
                    "padding_mask": (token_ids != 0).astype(np.int32), "masked_positions": positions}
        labels = {"mlm": targets, "nsp": self.next_sentence[rows]}
        weights = {"mlm": (targets != 0).astype(np.float32), "nsp": np.ones(len(rows), np.float32)}
        return features, labels, weights


# === 2. train (any Keras backend) ===


def build_pretrainer(config, vocabulary_size, train_steps, learning_rate, warmup_fraction):
    from kzoo import models
    from kzoo.train.schedules import WarmupLinearDecay

    sizes = {"bert_tiny": models.bert_tiny, "bert_mini": models.bert_mini, "bert_small": models.bert_small}
    backbone = sizes[config["preset"]](vocabulary_size=vocabulary_size, max_sequence_length=config["sequence_length"],
                                       dropout=config["dropout"])
    pretrainer = models.BertPretrainer(backbone)
    schedule = WarmupLinearDecay(learning_rate, train_steps, int(warmup_fraction * train_steps))
    pretrainer.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0),
        steps_per_execution=4,
    )
    return pretrainer


class KeepBest(keras.callbacks.Callback):
    """Keeps the weights of the epoch with the lowest validation loss and puts them back when training ends: on a
    corpus as small as WikiText-2, many passes can start to memorise it."""

    def __init__(self, monitor="val_loss"):
        super().__init__()
        self.monitor, self.best, self.best_epoch, self.weights = monitor, float("inf"), -1, None

    def on_epoch_end(self, epoch, logs=None):
        if logs and logs.get(self.monitor, float("inf")) < self.best:
            self.best, self.best_epoch, self.weights = logs[self.monitor], epoch, self.model.get_weights()

    def on_train_end(self, logs=None):
        if self.weights is not None:
            self.model.set_weights(self.weights)


def train(shards, output, minutes, batch_size, learning_rate, warmup_fraction, seed):
    from kzoo.train.callbacks import TimeBudget

    config = json.loads((pathlib.Path(shards) / "config.json").read_text())
    vocabulary_file = REPO / "data/wikitext2/vocab.txt"
    tokens = vocabulary_file.read_text(encoding="utf-8").splitlines()  # kzoo.text.wordpiece needs TensorFlow
    vocabulary_size, replacement_ids = len(tokens), random_ids(tokens)
    x, y, _ = load_split(shards, "train")
    check_remask(x, y, replacement_ids)
    validation = load_split(shards, "valid")  # kzoo's own masks: the recipe's fixed validation set
    batches = RemaskedPairs(x, y, batch_size, replacement_ids, seed, workers=4)
    print(f"backend {keras.backend.backend()}, devices {_devices()}; {len(y['nsp']):,} training pairs, "
          f"{len(batches)} batches of {batch_size} a pass", flush=True)

    # Time the step first, so that the learning-rate schedule can end (decay to zero) where the budget ends.
    keras.utils.set_random_seed(seed)
    probe = build_pretrainer(config, vocabulary_size, 10_000, learning_rate, warmup_fraction)
    probe.fit(batches, steps_per_epoch=64, epochs=1, verbose=0)  # compiles
    started = time.monotonic()
    probe.fit(batches, steps_per_epoch=512, epochs=1, verbose=0)
    step_seconds = (time.monotonic() - started) / 512
    budget = minutes * 60 - 60  # the second compilation, the evaluations and saving
    train_steps = int(budget / step_seconds)
    epochs = max(1, -(-train_steps // len(batches)))
    print(f"{step_seconds * 1000:.1f} ms/step at batch {batch_size}: {train_steps:,} steps "
          f"({train_steps / len(batches):.1f} passes over the pairs)", flush=True)
    del probe

    keras.utils.set_random_seed(seed)
    batches = RemaskedPairs(x, y, batch_size, replacement_ids, seed, workers=4)
    pretrainer = build_pretrainer(config, vocabulary_size, train_steps, learning_rate,
                                  warmup_fraction)
    started = time.monotonic()
    history = pretrainer.fit(
        batches, epochs=epochs, verbose=2, validation_data=validation, validation_batch_size=32,
        callbacks=[TimeBudget(minutes=budget / 60), keep_best := KeepBest()],
    )
    train_minutes = (time.monotonic() - started) / 60
    output = pathlib.Path(output)
    output.mkdir(parents=True, exist_ok=True)
    features, labels, weights = validation
    scores = pretrainer.evaluate(features, labels, sample_weight=weights, batch_size=32, return_dict=True, verbose=0)
    summary = {
        "backend": keras.backend.backend(), "devices": _devices(), "batch_size": batch_size,
        "learning_rate": learning_rate, "warmup_fraction": warmup_fraction, "planned_steps": train_steps,
        "steps_run": int(np.asarray(pretrainer.optimizer.iterations)),
        "steps": min(int(np.asarray(pretrainer.optimizer.iterations)), (keep_best.best_epoch + 1) * len(batches)),
        "train_minutes": round(train_minutes, 1),
        "ms_per_step": round(step_seconds * 1000, 2), "best_epoch": keep_best.best_epoch,
        "steps_per_epoch": len(batches), "history": history.history,
        **{f"val_{name}": float(value) for name, value in scores.items()},
    }
    (output / "accelerator_run.json").write_text(json.dumps(summary, indent=1, default=float) + "\n")
    save_weight_parts(pretrainer, output)
    print("final:", json.dumps({k: v for k, v in summary.items() if k != "history"}, default=float), flush=True)


def _devices():
    if keras.backend.backend() == "jax":
        import jax

        return [str(device) for device in jax.devices()]
    return ["cpu"]


def save_weight_parts(model, output):
    """The model's weights (not the optimizer's) as weights_00.npz, weights_01.npz, ... each under PART_BYTES."""
    part, size, index = {}, 0, 0
    for number, value in enumerate(model.get_weights()):
        if part and size + value.nbytes > PART_BYTES:
            _write_npz(pathlib.Path(output) / f"weights_{index:02d}.npz", part)
            part, size, index = {}, 0, index + 1
        part[f"w{number:04d}"] = value
        size += value.nbytes
    _write_npz(pathlib.Path(output) / f"weights_{index:02d}.npz", part)


def load_weight_parts(folder):
    weights = {}
    for path in sorted(glob.glob(str(pathlib.Path(folder) / "weights_*.npz"))):
        weights.update(np.load(path))
    return [weights[name] for name in sorted(weights)]


# === 3. import (TensorFlow) ===


def import_run(shards, weights, output):
    from kzoo.models import BertPretrainer
    from kzoo.text.wordpiece import load_vocabulary
    from kzoo.train import bert_pretraining_recipe as recipe

    run = json.loads((pathlib.Path(weights) / "accelerator_run.json").read_text())
    config = recipe.PretrainingConfig(**json.loads((pathlib.Path(shards) / "config.json").read_text()))
    config = dataclasses.replace(config, batch_size=run["batch_size"], learning_rate=run["learning_rate"],
                                 warmup_fraction=run["warmup_fraction"], train_steps=run["steps"],
                                 minutes=run["train_minutes"])
    vocabulary_size = len(load_vocabulary(config.vocabulary))
    pretrainer = BertPretrainer(recipe.build_backbone(config, vocabulary_size))
    pretrainer.compile()
    pretrainer.set_weights(load_weight_parts(weights))
    x, y, w = load_split(shards, "valid")
    scores = pretrainer.evaluate(x, y, sample_weight=w, batch_size=32, return_dict=True, verbose=0)
    differences = {name: abs(float(scores[name]) - run[f"val_{name}"]) for name in ("mlm_loss", "nsp_loss")}
    print("TensorFlow evaluation:", {k: round(float(v), 4) for k, v in scores.items()},
          "| |TF - accelerator|:", differences, flush=True)
    if max(differences.values()) > 1e-3:
        raise ValueError(f"the imported weights evaluate differently on TensorFlow: {differences}")

    output = pathlib.Path(output)
    output.mkdir(parents=True, exist_ok=True)
    pretrainer.backbone.save(output / "backbone.keras")
    (output / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")
    history = run["history"]
    with open(output / "history.csv", "w") as file:
        names = sorted(history)
        file.write("epoch," + ",".join(names) + "\n")
        for epoch in range(len(history[names[0]])):
            file.write(f"{epoch}," + ",".join(str(history[name][epoch]) for name in names) + "\n")
    results = {
        "steps": run["steps"], "train_minutes": run["train_minutes"], "device": run["devices"],
        "backend": run["backend"], "best_epoch": run["best_epoch"],
        **{name: round(values[run["best_epoch"]], 4) for name, values in history.items()},  # the weights kept
        **{f"val_{name}": round(float(value), 4) for name, value in scores.items()},
    }
    (output / "scores.json").write_text(json.dumps(results, indent=2) + "\n")
    print("wrote", output, json.dumps(results), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("export")
    p.add_argument("--output", required=True)
    p.add_argument("--train-batches", type=int, default=6000)
    p.add_argument("--validation-batches", type=int, default=20)
    p.add_argument("--shard-batches", type=int, default=1000)
    p = commands.add_parser("train")
    p.add_argument("--shards", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--minutes", type=float, default=7.0)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--learning-rate", type=float, default=5e-4)
    p.add_argument("--warmup-fraction", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1337)
    p = commands.add_parser("import")
    p.add_argument("--shards", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    if args.command == "export":
        export(args.output, args.train_batches, args.validation_batches, args.shard_batches)
    elif args.command == "train":
        train(args.shards, args.output, args.minutes, args.batch_size, args.learning_rate, args.warmup_fraction,
              args.seed)
    else:
        import_run(args.shards, args.weights, args.output)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
