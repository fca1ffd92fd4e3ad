"""Train an English→German Transformer on Multi30k (or any parallel files) and score it with BLEU.

    python -m kzoo.train.translation_recipe --output runs/multi30k --minutes 55

reproduces the shipped model: it learns a joint SentencePiece vocabulary from the training split, trains with
label-smoothed cross-entropy, the paper's warm-up schedule and Adam(0.9, 0.98, 1e-9) inside the strategy kzoo
picks, keeps a checkpoint per epoch, TensorBoard logs and a progress bar, stops early when the validation loss
stops improving (or when the time budget would run out), averages the last checkpoints, and writes
the model, the tokenizer, the configuration, the log and the BLEU/chrF scores (greedy and beam) to the output folder.
"""

import argparse
import dataclasses
import json
import logging
import pathlib
import time

import keras

from kzoo.data import multi30k, read_parallel
from kzoo.models import transformer_small
from kzoo.text import SubwordTokenizer, translation_batches
from kzoo.train.callbacks import TimeBudget, average_weights
from kzoo.train.config_arguments import add_config_arguments, config_from_arguments
from kzoo.train.distribution import strategy
from kzoo.train.fault_tolerance import StopOnNaN, WorkerBackupAndRestore
from kzoo.train.losses import MaskedAccuracy, MaskedCrossEntropy
from kzoo.train.quality import translation_scores
from kzoo.train.schedules import TransformerSchedule

logger = logging.getLogger("kzoo")


@dataclasses.dataclass
class TranslationConfig:
    """Everything a run depends on; printed at the start and saved beside the model."""

    vocabulary_size: int = 8000
    num_layers: int = 3
    hidden_dim: int = 256
    num_heads: int = 4
    intermediate_dim: int = 1024
    dropout: float = 0.1
    label_smoothing: float = 0.1
    max_tokens: int = 2048
    max_length: int = 128
    warmup_steps: int = 1000
    learning_rate_scale: float = 0.7
    epochs: int = 30
    steps_per_epoch: int = 0  # 0: one pass over the training data; else this many steps between checkpoints
    minutes: float = 55.0
    average_last: int = 5
    patience: int = 4  # stop after this many epochs without a better validation loss
    dtype: str = "float32"
    beam_size: int = 4
    length_penalty: float = 0.6
    seed: int = 1337


def build_model(config, vocabulary_size):
    return transformer_small(
        vocabulary_size=vocabulary_size,
        num_encoder_layers=config.num_layers,
        num_decoder_layers=config.num_layers,
        hidden_dim=config.hidden_dim,
        num_heads=config.num_heads,
        intermediate_dim=config.intermediate_dim,
        dropout=config.dropout,
        max_sequence_length=config.max_length,
        dtype=config.dtype,
    )


def compile_model(model, config):
    schedule = TransformerSchedule(config.hidden_dim, config.warmup_steps, config.learning_rate_scale)
    model.compile(
        optimizer=keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=MaskedCrossEntropy(config.label_smoothing),
        metrics=[MaskedAccuracy()],
    )


def score(translator, sources, references, batch_size=64):
    start = time.monotonic()
    hypotheses = translator.translate(sources, batch_size=batch_size)
    scores = translation_scores(hypotheses, references)
    scores["seconds"] = round(time.monotonic() - start, 1)
    return scores, hypotheses


def train(config, output_dir, train_pairs, val_pairs, test_pairs=None, verbose=1, methods=("greedy", "beam")):
    """Run the whole recipe; returns the scores dict that is also written to output_dir/scores.json."""
    from kzoo.translator import Translator

    output_dir = pathlib.Path(output_dir)
    (output_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(config.seed)
    print("config:", json.dumps(dataclasses.asdict(config)), flush=True)
    (output_dir / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")
    started = time.monotonic()

    print(f"learning a {config.vocabulary_size}-piece joint vocabulary from {len(train_pairs[0])} pairs", flush=True)
    tokenizer = SubwordTokenizer.train(train_pairs[0] + train_pairs[1], vocabulary_size=config.vocabulary_size)
    tokenizer.save(output_dir / "tokenizer.model")
    train_data = translation_batches(tokenizer, *train_pairs, max_tokens=config.max_tokens,
                                     max_length=config.max_length, seed=config.seed)
    val_data = translation_batches(tokenizer, *val_pairs, max_tokens=config.max_tokens,
                                   max_length=config.max_length, shuffle=False)

    with strategy().scope():
        model = build_model(config, tokenizer.vocabulary_size)
        compile_model(model, config)
    print(f"model: {model.count_params():,} parameters, dtype policy {config.dtype}", flush=True)

    checkpoint_pattern = str(output_dir / "checkpoints" / "epoch_{epoch:03d}.weights.h5")
    budget = TimeBudget(config.minutes)
    # Bucketing hides the number of batches from Keras; one pass finds it.
    steps_per_epoch = config.steps_per_epoch or sum(1 for _ in train_data)
    history = model.fit(
        train_data.repeat(),
        steps_per_epoch=steps_per_epoch,
        shuffle=False,  # the pipeline shuffles; Keras cannot shuffle a tf.data.Dataset
        validation_data=val_data,
        epochs=config.epochs,
        verbose=verbose,
        callbacks=[
            keras.callbacks.ModelCheckpoint(checkpoint_pattern, save_weights_only=True),
            keras.callbacks.TensorBoard(str(output_dir / "logs")),
            keras.callbacks.CSVLogger(str(output_dir / "history.csv")),
            keras.callbacks.EarlyStopping(monitor="val_loss", patience=config.patience),
            budget,
            WorkerBackupAndRestore(output_dir / "backup"),  # killed? the same command resumes from the last epoch
            StopOnNaN(),
        ],
    )
    epochs_run = len(history.history["loss"])
    train_seconds = time.monotonic() - started

    if config.average_last > 1:
        last = sorted((output_dir / "checkpoints").glob("epoch_*.weights.h5"))[-config.average_last :]
        print(f"averaging the last {len(last)} checkpoints: {[p.name for p in last]}", flush=True)
        average_weights(model, [str(p) for p in last])
    model.save(output_dir / "model.keras")

    results = {"epochs": epochs_run, "train_minutes": round(train_seconds / 60, 1),
               "val_loss": [round(v, 4) for v in history.history["val_loss"]]}
    splits = {"val": val_pairs, **({"test_2016_flickr": test_pairs} if test_pairs else {})}
    for method in methods:
        translator = Translator(model, tokenizer, method=method, beam_size=config.beam_size,
                                length_penalty=config.length_penalty, max_source_length=config.max_length)
        for split, (sources, references) in splits.items():
            scores, hypotheses = score(translator, sources, references)
            results[f"{split}_{method}"] = scores
            (output_dir / f"{split}_{method}.de").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
            print(f"{split} {method}: BLEU {scores['bleu']} chrF {scores['chrf']} ({scores['seconds']} s)", flush=True)
    results["total_minutes"] = round((time.monotonic() - started) / 60, 1)
    (output_dir / "scores.json").write_text(json.dumps(results, indent=2) + "\n")
    return model, tokenizer, results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, help="run folder: model, tokenizer, checkpoints, logs, scores")
    parser.add_argument("--train", nargs=2, metavar=("SOURCE", "TARGET"), help="parallel training files")
    parser.add_argument("--val", nargs=2, metavar=("SOURCE", "TARGET"), help="parallel validation files")
    parser.add_argument("--test", nargs=2, metavar=("SOURCE", "TARGET"), help="parallel test files")
    parser.add_argument("--verbose", type=int, default=1, help="Keras progress: 1 bar, 2 a line per epoch")
    add_config_arguments(parser, TranslationConfig)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = config_from_arguments(args, TranslationConfig)
    train_pairs = read_parallel(*args.train) if args.train else multi30k("train")
    val_pairs = read_parallel(*args.val) if args.val else multi30k("val")
    test_pairs = read_parallel(*args.test) if args.test else (None if args.train else multi30k("test_2016_flickr"))
    train(config, args.output, train_pairs, val_pairs, test_pairs, verbose=args.verbose)


if __name__ == "__main__":
    main()
