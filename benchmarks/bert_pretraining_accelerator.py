"""Pretrain the ablation's small BERT on a borrowed accelerator that has no TensorFlow, with Keras's JAX backend.

The CPU recipe (`python -m kzoo.train.bert_pretraining_recipe`) makes about 5,000 tokens/s here: two hours give a
`bert_mini` about 7,000 steps of 32 × 128 tokens, and in those its masked-LM loss stays on the unigram plateau
(benchmarks/RESULTS.md, bert-ablation). A GPU does that many steps in a minute, but the machine lent to this project
carries PyTorch and JAX, not TensorFlow, and accepts 64 MiB of files (the repository itself is about 41 of them). So
the run is split in three:

1. `export` (here, TensorFlow): the pairs of kzoo's own pipeline (`kzoo.text.pretraining_dataset`, exactly as the
   recipe calls it) and their masks, made by kzoo's own masking rule only: masking is static, as in Google's
   create_pretraining_data.py (its dupe_factor). Pass 0 holds the pipeline's own masks; pass p masks the same pairs
   again with `kzoo.text.pretraining_data.masked_lm_rule`, the function the pipeline masks with, as the pipeline's
   epochs p·E..p·E+E-1 would (E: the pipeline epochs the pairs come from). `train.npz` stores the unmasked token
   ids, segment ids and next-sentence labels once, and per pass only what changes: the masked positions (uint8)
   and the ids shown there ([MASK], a random token or the token itself; uint16). The targets are the unmasked ids
   at those positions; padding masks and masked-LM weights are implied (token id 0 is [PAD], position 0 is [CLS],
   never a target). `valid.npz` is the recipe's validation set with its masks. The export checks that pass 0,
   recomputed with the rule, equals the pipeline's masks, prints the files' sizes and refuses to write more than
   `--max-mib` (16 MiB by default) in all.
2. `train` (on the accelerator, `KERAS_BACKEND=jax`): the same `BertPretrainer` of `kzoo.models`, built and compiled
   as the recipe builds it (AdamW, weight decay 0.01, warm-up then linear decay, plus BERT's clipping of the global
   gradient norm at 1), trains on those pairs for a time budget, epoch e on pass e mod the number of passes, the
   pairs in a new order every epoch, and writes its weights as .npz parts small enough to come back. No masking
   happens on the accelerator.
3. `import` (here, TensorFlow): the weights go into the TensorFlow-built pretrainer, which is evaluated on the same
   validation batches (its losses must equal the accelerator's) and written as a run folder of the CPU recipe's
   shape (backbone.keras, config.json, scores.json, history.csv), which `benchmarks/bert_ablation.py` reads.

Usage:
    .venv/bin/python benchmarks/bert_pretraining_accelerator.py export --output shards/ --passes 16
    KERAS_BACKEND=jax python3 benchmarks/bert_pretraining_accelerator.py train --shards shards/ --output $OUT \\
        --minutes 7 --batch-size 128 --learning-rate 5e-4
    .venv/bin/python benchmarks/bert_pretraining_accelerator.py import --shards shards/ --weights OUT/ \\
        --output runs/bert_wikitext2_gpu
"""

import argparse
import dataclasses
import glob
import io
import json
import os
import pathlib
import sys
import time

import keras  # set KERAS_BACKEND before this runs: the train step uses "jax" where TensorFlow is absent
import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
PART_BYTES = 15 * 2**20  # files coming back from the accelerator must stay under 16 MiB each


# === 1. export (TensorFlow) ===


def export(output, train_batches, validation_batches, passes, max_mib):
    from kzoo.text.pretraining_data import masked_lm_rule
    from kzoo.train import bert_pretraining_recipe as recipe

    if passes < 1 or max_mib <= 0 or validation_batches < 1 or (train_batches is not None and train_batches < 1):
        raise ValueError(f"--passes {passes}, --max-mib {max_mib}, --train-batches {train_batches} and "
                         f"--validation-batches {validation_batches} must be positive.")
    config = recipe.PretrainingConfig()
    preprocessor = recipe.text_preprocessor(config)
    if preprocessor.vocabulary_size() > np.iinfo(np.uint16).max or config.sequence_length > np.iinfo(np.uint8).max:
        raise ValueError("the passes store token ids as uint16 and positions as uint8: the configuration is too big.")
    ids = preprocessor.vocabulary_size(), preprocessor.token_to_id("[MASK]")  # the accelerator has no vocabulary reader
    mask = masked_lm_rule(preprocessor, config.max_predictions, config.mask_rate, config.whole_word)
    train = recipe.pretraining_batches(config, preprocessor, recipe.wikitext_articles("train"), config.seed)
    valid = recipe.pretraining_batches(config, preprocessor, recipe.wikitext_articles("valid"), config.seed + 1)
    files = {  # the recipe's validation set: the same seed, pairs and masks
        "train.npz": _npz_bytes(masked_passes(train, train_batches, passes, mask, config.seed, *ids)),
        "valid.npz": _npz_bytes(masked_passes(valid, validation_batches, 1, mask, config.seed + 1, *ids)),
    }
    write_bounded(output, files, max_mib)
    (pathlib.Path(output) / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")


def write_bounded(output, files, max_mib):
    """Write `files` ({name: bytes}) into the folder `output`, or nothing if they take more than `max_mib` MiB."""
    total = sum(len(data) for data in files.values()) / 2**20
    sizes = ", ".join(f"{name} {len(data) / 2**20:.2f} MiB" for name, data in files.items())
    if total > max_mib:
        raise ValueError(f"the export would take {total:.2f} MiB ({sizes}), over --max-mib {max_mib}: the run also "
                         "carries the repository (about 41 MiB) and Keras's wheels within 64 MiB. Export fewer "
                         "--train-batches or --passes.")
    output = pathlib.Path(output)
    output.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        _write(output / name, data)
    print(f"wrote {output}: {sizes}, {total:.2f} MiB of at most {max_mib}", flush=True)


def masked_passes(dataset, count, passes, mask, seed, vocabulary_size, mask_id):
    """The first `count` batches of `dataset` (fewer if its pipeline runs out first: None reads one whole epoch) as
    unmasked pairs and `passes` sets of masks, pass 0 the pipeline's own, checked against the rule."""
    import tensorflow as tf

    batches, epoch = [], 0  # (epoch, batch index, features, labels): each iteration over the dataset is one epoch
    while count is None or len(batches) < count:
        before = len(batches)
        for index, (features, labels, _) in enumerate(dataset):
            if len(batches) == count:
                break
            batches.append((epoch, index, features, labels))
        if count is None or len(batches) == before:
            break
        epoch += 1
    epochs = batches[-1][0] + 1
    rows = {"tokens": [], "segment_ids": [], "nsp": [], "masked_positions": [], "masked_ids": []}
    seed, rule = tf.constant(seed, tf.int64), tf.function(mask)  # tensors, so that it is traced once per shape
    for epoch, index, features, labels in batches:
        tokens = original_tokens(features["token_ids"].numpy(), features["masked_positions"].numpy(),
                                 labels["mlm"].numpy())
        positions, shown = [], []
        for number in range(passes):
            masked, places, targets, _ = rule(tf.constant(tokens), seed, tf.constant(epoch + number * epochs, tf.int64),
                                              tf.constant(index, tf.int64))
            if number == 0 and not (np.array_equal(masked, features["token_ids"])
                                    and np.array_equal(places, features["masked_positions"])
                                    and np.array_equal(targets, labels["mlm"])):
                raise AssertionError(f"masked_lm_rule does not give the pipeline's masks of batch {index} of epoch "
                                     f"{epoch}: the export's seeds no longer follow pretraining_dataset's.")
            positions.append(places.numpy())
            shown.append(np.take_along_axis(masked.numpy(), places.numpy(), 1) * (targets.numpy() != 0))
        rows["tokens"].append(tokens.astype(np.uint16))
        rows["segment_ids"].append(features["segment_ids"].numpy().astype(np.uint8))
        rows["nsp"].append(labels["nsp"].numpy().astype(np.uint8))
        rows["masked_positions"].append(np.stack(positions).astype(np.uint8))  # (passes, batch, P)
        rows["masked_ids"].append(np.stack(shown).astype(np.uint16))
    arrays = {name: np.concatenate(parts, axis=1 if name.startswith("masked") else 0) for name, parts in rows.items()}
    arrays["vocabulary_size"], arrays["mask_id"] = np.array(vocabulary_size), np.array(mask_id)
    print(f"{len(arrays['nsp']):,} pairs ({len(batches)} batches from {epochs} pipeline epoch(s)), {passes} "
          "pass(es) of masks", flush=True)
    return arrays


def _npz_bytes(arrays):
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def _write(path, data):
    partial = path.with_name(path.name + ".partial")  # never leave a half-written file under its real name
    partial.write_bytes(data)
    os.replace(partial, path)


def original_tokens(token_ids, masked_positions, targets):
    """Token ids before masking: the masked-LM targets written back at their positions."""
    tokens = token_ids.copy()
    used = targets != 0
    rows = np.broadcast_to(np.arange(len(tokens))[:, None], used.shape)
    tokens[rows[used], masked_positions[used]] = targets[used]
    return tokens


def load_passes(shards, split):
    """The exported pairs and masks of `split` ("train" or "valid"), as int32 arrays."""
    path = pathlib.Path(shards) / f"{split}.npz"
    if not path.is_file():
        raise FileNotFoundError(f"no {path}: run the export step first (it writes train.npz and valid.npz).")
    with np.load(path) as arrays:
        return {name: arrays[name].astype(np.int32) for name in arrays.files}


def masked_batch(data, number, rows):
    """Features, labels and sample weights of pairs `rows` with the masks of pass `number`, as the recipe's
    pipeline gives them."""
    tokens, positions, shown = (data["tokens"][rows], data["masked_positions"][number, rows],
                                data["masked_ids"][number, rows])
    used = positions != 0  # position 0 is [CLS], never a target: 0 marks an unused slot
    targets = np.where(used, np.take_along_axis(tokens, positions, 1), 0)
    token_ids = tokens.copy()
    token_ids[np.broadcast_to(np.arange(len(rows))[:, None], used.shape)[used], positions[used]] = shown[used]
    features = {"token_ids": token_ids, "segment_ids": data["segment_ids"][rows],
                "padding_mask": (tokens != 0).astype(np.int32), "masked_positions": positions}  # [PAD] is id 0
    labels = {"mlm": targets, "nsp": data["nsp"][rows]}
    weights = {"mlm": used.astype(np.float32), "nsp": np.ones(len(rows), np.float32)}
    return features, labels, weights


def load_split(shards, split):
    """Features, labels and sample weights of every pair of `split` with its first masks (the validation set)."""
    data = load_passes(shards, split)
    return masked_batch(data, 0, np.arange(len(data["nsp"])))


def check_passes(data):
    """Each pass must give each pair at least one target, and [MASK], random and unchanged ids about 80/10/10."""
    used = data["masked_positions"] != 0
    if not used.any(axis=2).all():
        raise AssertionError("a pass leaves a pair without a masked-LM target: the export is damaged.")
    shown = data["masked_ids"][used]
    originals = np.take_along_axis(data["tokens"][None], data["masked_positions"], 2)[used]
    kept, masked = np.mean(shown == originals), np.mean(shown == data["mask_id"])
    print(f"{len(used)} passes of masks, {used.sum(2).mean():.2f} targets per pair; [MASK] {masked:.3f}, "
          f"unchanged {kept:.3f}, random {1 - masked - kept:.3f}", flush=True)


class StaticMaskedPairs(keras.utils.PyDataset):
    """Batches of the exported pairs, in a new order every epoch (seeded by seed and epoch), with the masks of pass
    epoch mod the number of passes."""

    def __init__(self, data, batch_size, seed, **kwargs):
        super().__init__(**kwargs)
        self.data, self.batch_size, self.seed = data, batch_size, seed
        self.passes, self.pairs = data["masked_positions"].shape[:2]
        self.epoch = 0
        self.order = np.random.default_rng([seed, 0]).permutation(self.pairs)

    def __len__(self):
        return self.pairs // self.batch_size

    def on_epoch_end(self):
        self.epoch += 1
        self.order = np.random.default_rng([self.seed, self.epoch]).permutation(self.pairs)

    def __getitem__(self, index):
        rows = self.order[index * self.batch_size:(index + 1) * self.batch_size]
        return masked_batch(self.data, self.epoch % self.passes, rows)


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
    data = load_passes(shards, "train")
    check_passes(data)
    vocabulary_size = int(data["vocabulary_size"])
    validation = load_split(shards, "valid")  # kzoo's own masks: the recipe's fixed validation set
    batches = StaticMaskedPairs(data, batch_size, seed, workers=4)
    print(f"backend {keras.backend.backend()}, devices {_devices()}; {batches.pairs:,} training pairs, "
          f"{len(batches)} batches of {batch_size} a pass, {batches.passes} passes of masks", flush=True)

    # Time the step first, so that the learning-rate schedule can end (decay to zero) where the budget ends.
    keras.utils.set_random_seed(seed)
    probe = build_pretrainer(config, vocabulary_size, 10_000, learning_rate, warmup_fraction)
    probe_steps = min(512, len(batches))  # within a pass, so that the data never runs out
    probe.fit(batches, steps_per_epoch=min(64, probe_steps), epochs=1, verbose=0)  # compiles
    started = time.monotonic()
    probe.fit(batches, steps_per_epoch=probe_steps, epochs=1, verbose=0)
    step_seconds = (time.monotonic() - started) / probe_steps
    budget = minutes * 60 - 60  # the second compilation, the evaluations and saving
    train_steps = int(budget / step_seconds)
    epochs = max(1, -(-train_steps // len(batches)))
    print(f"{step_seconds * 1000:.1f} ms/step at batch {batch_size}: {train_steps:,} steps "
          f"({train_steps / len(batches):.1f} passes over the pairs)", flush=True)
    del probe

    keras.utils.set_random_seed(seed)
    batches = StaticMaskedPairs(data, batch_size, seed, workers=4)
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
            _write(pathlib.Path(output) / f"weights_{index:02d}.npz", _npz_bytes(part))
            part, size, index = {}, 0, index + 1
        part[f"w{number:04d}"] = value
        size += value.nbytes
    _write(pathlib.Path(output) / f"weights_{index:02d}.npz", _npz_bytes(part))


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
    p.add_argument("--train-batches", type=int, default=None,
                   help="batches of pairs to export (default: one whole pass over the corpus, 765 batches of 32 on "
                        "WikiText-2); more than a pass take the pairs of later pipeline epochs")
    p.add_argument("--validation-batches", type=int, default=20)
    p.add_argument("--passes", type=int, default=16, help="sets of masks of the training pairs (default: 16)")
    p.add_argument("--max-mib", type=float, default=16.0,
                   help="the most the export may write, in MiB (default: 16; a run carries 64 in all)")
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
        export(args.output, args.train_batches, args.validation_batches, args.passes, args.max_mib)
    elif args.command == "train":
        train(args.shards, args.output, args.minutes, args.batch_size, args.learning_rate, args.warmup_fraction,
              args.seed)
    else:
        import_run(args.shards, args.weights, args.output)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
