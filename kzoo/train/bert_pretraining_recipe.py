"""Pretrain a small BERT on WikiText-2 with masked-LM + next-sentence prediction.

    python -m kzoo.train.bert_pretraining_recipe --output runs/bert_pretraining

streams the shipped WikiText-2 articles, builds next-sentence pairs and masks 15% of
the pieces afresh every epoch (`kzoo.text.pretraining_dataset`), and trains `BertPretrainer` on a `bert_mini`-sized
backbone with AdamW and a warm-up/linear-decay schedule inside the strategy kzoo picks. It keeps a checkpoint per
epoch, TensorBoard logs, a CSV history and a progress bar, stops on the step or time budget, and writes the backbone
(`backbone.keras`, what fine-tuning loads), its vocabulary, the configuration and the final validation scores.
"""

import argparse
import dataclasses
import json
import math
import pathlib
import shutil
import time

import keras
import tensorflow as tf

from kzoo.data.wikitext import WIKITEXT2_DIR, wikitext2_file, wikitext_documents
from kzoo.models import BertPretrainer, bert_presets
from kzoo.text.pretraining_data import pretraining_dataset
from kzoo.text.wordpiece import load_vocabulary, wordpiece_tokenizer
from kzoo.train.callbacks import TimeBudget
from kzoo.train.config_arguments import add_config_arguments, config_from_arguments
from kzoo.train.distribution import strategy
from kzoo.train.fault_tolerance import StopOnNaN, WorkerBackupAndRestore
from kzoo.train.schedules import WarmupLinearDecay


@dataclasses.dataclass
class PretrainingConfig:
    """Everything a run depends on; printed at the start and saved beside the model."""

    preset: str = "bert_mini"  # 4 layers, hidden 256, 4 heads
    vocabulary: str = str(WIKITEXT2_DIR / "vocab.txt")
    sequence_length: int = 128
    batch_size: int = 32
    max_predictions: int = 20
    mask_rate: float = 0.15
    whole_word: bool = False
    learning_rate: float = 5e-4
    warmup_fraction: float = 0.1
    train_steps: int = 5000
    steps_per_epoch: int = 500  # steps between checkpoints and validations
    validation_batches: int = 20
    minutes: float = 40.0
    dropout: float = 0.1
    seed: int = 1337
    initial_weights: str = ""  # a checkpoint (.weights.h5) of an earlier run of this recipe, to continue from


def build_backbone(config, vocabulary_size):
    """The backbone both the pretraining run and a from-scratch fine-tuning baseline use."""
    if config.preset not in bert_presets.SIZES:
        raise ValueError(f"preset={config.preset!r} is not a BERT preset; use one of {tuple(bert_presets.SIZES)}.")
    build = getattr(bert_presets, config.preset)
    return build(vocabulary_size=vocabulary_size, max_sequence_length=config.sequence_length, dropout=config.dropout)


def wikitext_articles(split):
    """A zero-argument function that streams the shipped WikiText-2 split, one article (a list of paragraphs) at a
    time: what `pretraining_dataset` reads every epoch."""
    path = wikitext2_file(split)
    return lambda: wikitext_documents(path)


def pretraining_batches(config, tokenizer, documents, seed):
    return pretraining_dataset(
        documents,
        tokenizer,
        sequence_length=config.sequence_length,
        batch_size=config.batch_size,
        max_predictions=config.max_predictions,
        mask_rate=config.mask_rate,
        whole_word=config.whole_word,
        seed=seed,
    )


def train(config, output_dir, verbose=1, train_documents=None, validation_documents=None):
    """Run the whole recipe; returns the pretrainer and the scores dict also written to output_dir/scores.json.

    `train_documents` / `validation_documents`: zero-argument functions returning iterables of documents (lists of
    paragraphs or sentences); they default to the shipped WikiText-2 train and valid splits.
    """
    output_dir = pathlib.Path(output_dir)
    (output_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(config.seed)
    print("config:", json.dumps(dataclasses.asdict(config)), flush=True)
    (output_dir / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")
    shutil.copyfile(config.vocabulary, output_dir / "vocab.txt")
    started = time.monotonic()

    vocabulary = load_vocabulary(config.vocabulary)
    tokenizer = wordpiece_tokenizer(vocabulary)
    train_data = pretraining_batches(config, tokenizer, train_documents or wikitext_articles("train"), config.seed)
    # A fixed validation set: the same pairs and masks at every evaluation. Its size must be known to Keras: on a
    # dataset of unknown cardinality, Keras 3.15's evaluate reports each output's loss N/(N+1) of its value.
    validation_data = (
        pretraining_batches(config, tokenizer, validation_documents or wikitext_articles("valid"), config.seed + 1)
        .take(config.validation_batches)
        .cache()
        .apply(tf.data.experimental.assert_cardinality(config.validation_batches))
    )

    with strategy().scope():
        pretrainer = BertPretrainer(build_backbone(config, len(vocabulary)))
        warmup_steps = int(config.warmup_fraction * config.train_steps)
        schedule = WarmupLinearDecay(config.learning_rate, config.train_steps, warmup_steps)
        pretrainer.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01, epsilon=1e-6))
        if config.initial_weights:
            pretrainer.load_weights(config.initial_weights)  # the model's weights; the optimizer starts afresh
    print(f"pretrainer: {pretrainer.count_params():,} parameters "
          f"(backbone {pretrainer.backbone.count_params():,})", flush=True)

    epochs = math.ceil(config.train_steps / config.steps_per_epoch)
    history = pretrainer.fit(
        train_data.repeat(),
        steps_per_epoch=config.steps_per_epoch,
        epochs=epochs,
        validation_data=validation_data,
        shuffle=False,  # the pipeline shuffles; Keras cannot shuffle a tf.data.Dataset
        verbose=verbose,
        callbacks=[
            keras.callbacks.ModelCheckpoint(
                str(output_dir / "checkpoints" / "epoch_{epoch:03d}.weights.h5"), save_weights_only=True
            ),
            keras.callbacks.TensorBoard(str(output_dir / "logs")),
            keras.callbacks.CSVLogger(str(output_dir / "history.csv")),
            TimeBudget(config.minutes),
            WorkerBackupAndRestore(output_dir / "backup"),  # killed? the same command resumes from the last epoch
            StopOnNaN(),
        ],
    )
    pretrainer.backbone.save(output_dir / "backbone.keras")
    results = {
        "steps": len(history.history["loss"]) * config.steps_per_epoch,
        "train_minutes": round((time.monotonic() - started) / 60, 1),
        **{name: round(values[-1], 4) for name, values in history.history.items()},
    }
    print("final:", json.dumps(results), flush=True)
    (output_dir / "scores.json").write_text(json.dumps(results, indent=2) + "\n")
    return pretrainer, history, results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, help="run folder: backbone, vocabulary, checkpoints, logs, scores")
    parser.add_argument("--verbose", type=int, default=1, help="Keras progress: 1 bar, 2 a line per epoch")
    add_config_arguments(parser, PretrainingConfig)
    args = parser.parse_args(argv)
    config = config_from_arguments(args, PretrainingConfig)
    train(config, args.output, verbose=args.verbose)


if __name__ == "__main__":
    main()
