"""Fine-tune a BERT backbone on a GLUE task (SST-2 or MRPC) and report dev accuracy and F1.

    python -m kzoo.train.bert_finetuning_recipe --task sst2 --backbone runs/bert_pretraining/backbone.keras \\
        --output runs/sst2
    python -m kzoo.train.bert_finetuning_recipe --task sst2 --checkpoint path/to/all-MiniLM-L6-v2 --output runs/sst2

loads the pretrained backbone (or, without --backbone, initialises one of the same size at random: the ablation's
baseline; or, with --checkpoint, a public BERT checkpoint with its own tokenizer), adds `BertClassifier`'s head,
trains with AdamW (with layer-wise learning-rate decay under --layer-decay) and BERT's warm-up/linear-decay schedule
for a fixed number of steps inside the strategy kzoo picks, evaluates on the dev split after every epoch, and writes
the classifier, the configuration, the history and the dev scores to the output folder.

With --ema-momentum m (for example 0.999) the optimizer also keeps an exponential moving average of the trainable
weights, over about the last 1 / (1 - m) steps, and the run ends on it (Keras's `use_ema`): the saved classifier and
the final dev scores are the average's, while the per-epoch dev accuracies in the history are those of the weights
being trained. Keep 1 / (1 - m) well under the number of steps: the average starts from the weights after the first.
"""

import argparse
import dataclasses
import json
import math
import pathlib
import time

import keras
import numpy as np

from kzoo.data.glue import glue
from kzoo.data.wikitext import WIKITEXT2_DIR
from kzoo.models import BertClassifier
from kzoo.models import Bert
from kzoo.text.bert_preprocessor import BertPreprocessor
from kzoo.text.classification_batches import classification_dataset, preprocessed_dataset
from kzoo.text.wordpiece import load_vocabulary, wordpiece_tokenizer
from kzoo.train.bert_pretraining_recipe import PretrainingConfig, build_backbone
from kzoo.train.config_arguments import add_config_arguments, config_from_arguments
from kzoo.train.distribution import strategy
from kzoo.train.fault_tolerance import StopOnNaN, WorkerBackupAndRestore
from kzoo.train.metrics import SparseF1Score
from kzoo.train.optimizers import LayerwiseAdamW, bert_layer_decay
from kzoo.train.schedules import WarmupLinearDecay

TASK_SEQUENCE_LENGTHS = {"sst2": 64, "mrpc": 128}  # SST-2 sentences fit in 64 pieces; MRPC pairs need 128


@dataclasses.dataclass
class FinetuningConfig:
    """Everything a run depends on; printed at the start and saved beside the model."""

    task: str = "sst2"
    backbone: str = ""  # a pretrained backbone (.keras); "" builds a randomly initialised one, as pretraining does
    checkpoint: str = ""  # a public checkpoint (Hugging Face or Google folder, or release name): backbone + tokenizer
    preset: str = "bert_mini"  # the size of that randomly initialised backbone
    vocabulary: str = str(WIKITEXT2_DIR / "vocab.txt")
    sequence_length: int = 0  # 0: the task's default (TASK_SEQUENCE_LENGTHS)
    batch_size: int = 32
    learning_rate: float = 1e-4
    warmup_fraction: float = 0.1
    epochs: int = 3
    train_steps: int = 0  # 0: `epochs` full passes; else exactly this many steps, spread over `epochs` epochs
    train_examples: int = 0  # 0: the whole training split; else its first this many examples
    dev_examples: int = 0  # 0: the whole dev split
    dropout: float = 0.1
    seed: int = 1337
    trim_padding: bool = False  # cut each batch to its longest example (same outputs, less work on short texts)
    group_by_length: bool = False  # training batches of similar-length examples (with trim_padding: less padding)
    pooling: str = "pooled"  # the head reads BERT's [CLS] pooler ("pooled") or the mean of the last layer ("mean")
    freeze_token_embedding: bool = False  # keep the pretrained token embedding table as it is (a faster step)
    layer_decay: float = 1.0  # each encoder block down learns this times slower than the one above (1: no decay)
    ema_momentum: float = 0.0  # > 0: keep this exponential moving average of the weights and end on it (0: off)


def load_backbone(config, vocabulary_size):
    """The pretrained backbone at `config.backbone`, or, for the from-scratch baseline, a fresh one built exactly as
    the pretraining recipe builds its own."""
    if config.checkpoint:
        return Bert.from_checkpoint(config.checkpoint, dropout=config.dropout)
    if config.backbone:
        backbone = keras.saving.load_model(config.backbone)
        if backbone.vocabulary_size != vocabulary_size:
            raise ValueError(
                f"{config.backbone} has a {backbone.vocabulary_size}-token vocabulary but {config.vocabulary} has "
                f"{vocabulary_size} tokens: fine-tune with the vocabulary the backbone was pretrained with."
            )
        return backbone
    return build_backbone(PretrainingConfig(preset=config.preset, dropout=config.dropout), vocabulary_size)


def text_batches(config, sequence_length):
    """A function making the task's batches from texts, and the vocabulary size: the checkpoint's own tokenizer
    (`BertPreprocessor`) with --checkpoint, else WordPiece with `config.vocabulary` (the pretraining recipe's)."""
    if config.checkpoint:
        preprocessor = BertPreprocessor.from_checkpoint(config.checkpoint, sequence_length=sequence_length)

        def batches(texts, labels, **options):
            return preprocessed_dataset(texts, labels, preprocessor, config.batch_size,
                                        trim_padding=config.trim_padding, **options)

        return batches, len(preprocessor.vocabulary)
    vocabulary = load_vocabulary(config.vocabulary)
    tokenizer = wordpiece_tokenizer(vocabulary)

    def batches(texts, labels, **options):
        return classification_dataset(texts, labels, tokenizer, sequence_length, config.batch_size,
                                      trim_padding=config.trim_padding, **options)

    return batches, len(vocabulary)


def dev_scores(classifier, dataset, labels):
    """Accuracy and F1 of the positive class (1) on a dataset, from the argmax of the logits."""
    logits = classifier.predict(dataset, verbose=0)
    f1 = SparseF1Score()
    f1.update_state(np.asarray(labels), logits)
    return {
        "accuracy": round(float(np.mean(np.argmax(logits, axis=-1) == np.asarray(labels))), 4),
        "f1": round(float(f1.result()), 4),
    }


def train(config, output_dir, verbose=1):
    """Run the whole recipe; returns the classifier and the scores dict also written to output_dir/scores.json."""
    if config.task not in TASK_SEQUENCE_LENGTHS:
        raise ValueError(f"task={config.task!r} is not supported; use one of {tuple(TASK_SEQUENCE_LENGTHS)}.")
    if not 0 <= config.ema_momentum < 1:
        raise ValueError(f"ema_momentum={config.ema_momentum} must be in [0, 1): 0 turns the moving average off, "
                         "0.999 averages over about the last 1000 steps.")
    output_dir = pathlib.Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(config.seed)
    print("config:", json.dumps(dataclasses.asdict(config)), flush=True)
    (output_dir / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")
    started = time.monotonic()

    if config.checkpoint and config.backbone:
        raise ValueError(f"checkpoint={config.checkpoint!r} and backbone={config.backbone!r}: give one of them.")
    sequence_length = config.sequence_length or TASK_SEQUENCE_LENGTHS[config.task]
    train_split, dev_split = glue(config.task, "train"), glue(config.task, "dev")
    train_split = train_split._replace(**{
        name: value[: config.train_examples or None] if value is not None else None
        for name, value in (("texts", train_split.texts), ("second_texts", train_split.second_texts),
                            ("labels", train_split.labels))
    })
    dev_labels = dev_split.labels[: config.dev_examples or None]
    dev_second = dev_split.second_texts[: len(dev_labels)] if dev_split.second_texts else None
    batches, vocabulary_size = text_batches(config, sequence_length)
    train_data = batches(train_split.texts, train_split.labels, second_texts=train_split.second_texts, shuffle=True,
                         seed=config.seed, drop_remainder=True, group_by_length=config.group_by_length)
    dev_data = batches(dev_split.texts[: len(dev_labels)], dev_labels, second_texts=dev_second)
    steps_per_pass = len(train_split.labels) // config.batch_size
    total_steps = config.train_steps or config.epochs * steps_per_pass
    steps_per_epoch = math.ceil(total_steps / config.epochs)
    print(f"{config.task}: {len(train_split.labels)} training examples, {len(dev_labels)} dev; {total_steps} steps of "
          f"{config.batch_size} ({total_steps * config.batch_size / len(train_split.labels):.2f} passes)", flush=True)

    with strategy().scope():
        backbone = load_backbone(config, vocabulary_size)
        if config.pooling == "mean":
            backbone.pooler.trainable = False  # the head does not read the [CLS] pooler: nothing to train there
        if config.freeze_token_embedding:
            backbone.token_embedding.trainable = False
        classifier = BertClassifier(backbone, num_classes=len(train_split.label_names), dropout=config.dropout,
                                    pooling=config.pooling)
        schedule = WarmupLinearDecay(config.learning_rate, total_steps, int(config.warmup_fraction * total_steps))
        multipliers = bert_layer_decay(backbone.num_layers, config.layer_decay)  # all 1 by default: plain AdamW
        classifier.compile(
            optimizer=LayerwiseAdamW(multipliers, learning_rate=schedule, weight_decay=0.01, epsilon=1e-6,
                                     use_ema=config.ema_momentum > 0, ema_momentum=config.ema_momentum),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy"), SparseF1Score(name="f1")],
        )
    source = config.checkpoint or config.backbone
    print(f"classifier: {classifier.count_params():,} parameters, backbone "
          f"{'from ' + source if source else 'randomly initialised'}", flush=True)
    history = classifier.fit(
        train_data.repeat(),
        steps_per_epoch=steps_per_epoch,
        epochs=config.epochs,
        validation_data=dev_data,
        shuffle=False,  # the pipeline shuffles; Keras cannot shuffle a tf.data.Dataset
        verbose=verbose,
        callbacks=[
            keras.callbacks.CSVLogger(str(output_dir / "history.csv")),
            WorkerBackupAndRestore(output_dir / "backup"),  # killed? the same command resumes from the last epoch
            StopOnNaN(),
        ],
    )
    train_minutes = round((time.monotonic() - started) / 60, 1)
    classifier.save(output_dir / "classifier.keras")

    results = {
        "task": config.task,
        "backbone": config.checkpoint or config.backbone or "random",
        "steps": steps_per_epoch * config.epochs,
        "train_minutes": train_minutes,
        "dev_accuracy_per_epoch": [round(v, 4) for v in history.history["val_accuracy"]],
        "dev": dev_scores(classifier, dev_data, dev_labels),
    }
    print(f"{config.task} dev: accuracy {results['dev']['accuracy']:.4f}, F1 {results['dev']['f1']:.4f} "
          f"({train_minutes} min)", flush=True)
    (output_dir / "scores.json").write_text(json.dumps(results, indent=2) + "\n")
    return classifier, results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, help="run folder: classifier, config, history, scores")
    parser.add_argument("--verbose", type=int, default=1, help="Keras progress: 1 bar, 2 a line per epoch")
    add_config_arguments(parser, FinetuningConfig)
    args = parser.parse_args(argv)
    config = config_from_arguments(args, FinetuningConfig)
    train(config, args.output, verbose=args.verbose)


if __name__ == "__main__":
    main()
