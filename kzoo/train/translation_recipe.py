"""Train an English→German Transformer on Multi30k (or any parallel files) and score it with BLEU.

    python -m kzoo.train.translation_recipe --output runs/multi30k

reproduces the shipped model: it learns a joint SentencePiece vocabulary from the training split, trains with
label-smoothed cross-entropy, the paper's warm-up schedule and Adam(0.9, 0.98, 1e-9) inside the strategy kzoo
picks, keeps a checkpoint per epoch, TensorBoard logs and a progress bar, stops early when the validation loss
stops improving (or when the time budget would run out), averages the last checkpoints, and writes the model
(model.keras), the tokenizer (tokenizer.model), the configuration, the log and the BLEU/chrF scores (greedy and beam)
to the run folder, which `kzoo.translator.Translator.load` and `python -m kzoo.export --run` read.
"""

import dataclasses

from kzoo.train.recipe_config import check_settings, setting
from kzoo.train.run import recipe_parser, run_recipe

MODULE = "kzoo.train.translation_recipe"
DTYPES = ("float32", "mixed_bfloat16", "mixed_float16")
SCHEDULES = ("inverse_sqrt", "linear_to_budget")
# Named configurations of the recipe (`--preset NAME`, `TranslationConfig.from_preset(NAME)`), each given as the
# fields it changes from the defaults (which reproduce the shipped model's versions 1-4). benchmarks/RESULTS.md,
# sections translation-study-training and translation-study-decoding, says how they were chosen: on val BLEU only.

PRESETS = {
    # The study's best on val: the shipped model's size with dropout 0.2, in mixed bfloat16 (1.5x the steps of
    # float32 on an AMD EPYC with AVX-512 BF16; a CPU without bfloat16 instructions may run it slower than float32,
    # so time both with benchmarks/translation_step_time.py), trained for the whole hour (early stopping left to the
    # budget, at most 40 epochs), and the final model is the moving average of the weights (momentum 0.999 a step,
    # kzoo.train.MovingAverage) instead of the last 5 epochs averaged: 40.80 val BLEU with beam 4 and length penalty
    # 0.8 (run s16, 40 epochs in 55 minutes; shipped as version 11), against 40.28 for the last 5 epochs of the same
    # run and 39.98 for run s7 (the same settings without the average, 23 epochs in its slower machine's hour).
    # Beam 4 at 0.8 decodes fewer hypotheses and steps than beam 5 at 1.0 (the study's earlier rows).
    # Dropout 0.15 and 0.3 scored lower over the whole hour (s18: 39.80, s17: 39.90), but 0.15 led at 21 epochs
    # (40.23 against s16's 39.79 there): a machine that fits only about 20 epochs in the hour may do better with it.
    "multi30k_hour": {"minutes": 60.0, "beam_size": 4, "length_penalty": 0.8, "dtype": "mixed_bfloat16",
                      "dropout": 0.2, "epochs": 40, "patience": 40, "ema_momentum": 0.999},
}


@dataclasses.dataclass
class TranslationConfig:
    """Everything a translation run depends on; printed at the start and saved in the run folder. Every field is a
    `--flag` of the command line (`--help` lists them with their meanings, defaults and allowed values); a value
    outside what a field accepts is refused when the configuration is made, before any work.

    Example:
    ```python
    from kzoo.train.translation_recipe import TranslationConfig

    config = TranslationConfig(dropout=0.3, epochs=40)
    config.hidden_dim, config.dropout  # (256, 0.3)
    ```
    """

    vocabulary_size: int = setting(8000, "pieces of the joint SentencePiece vocabulary", minimum=300)
    encoder_layers: int = setting(3, "encoder blocks", minimum=1)
    decoder_layers: int = setting(3, "decoder blocks", minimum=1)
    hidden_dim: int = setting(256, "d_model, the width of every position's vector", minimum=1)
    num_heads: int = setting(4, "attention heads; must divide hidden_dim", minimum=1)
    intermediate_dim: int = setting(1024, "d_ff, the inner size of the feed-forward networks", minimum=1)
    dropout: float = setting(0.1, "dropout on embeddings, sub-layer outputs and attention weights", minimum=0.0,
                             below=1.0)
    label_smoothing: float = setting(0.1, "label smoothing of the cross-entropy", minimum=0.0, below=1.0)
    subword_dropout: float = setting(0.0, "BPE-dropout of the training sentences (Provilkov et al. 2020): each merge "
                                     "skipped with this probability, segmented afresh every epoch; 0: off",
                                     minimum=0.0, below=1.0)
    max_tokens: int = setting(2048, "tokens per side in a batch (length-bucketed batches)", minimum=2)
    max_length: int = setting(128, "subwords kept per sentence, end token included", minimum=4)
    warmup_steps: int = setting(1000, "warm-up steps of the paper's learning-rate schedule", minimum=1)
    weight_decay: float = setting(0.0, "decoupled weight decay (AdamW, Loshchilov & Hutter 2019) of the weight "
                                  "matrices and embeddings, times the learning rate each step; biases and layer-norm "
                                  "scales and offsets are not decayed; 0: plain Adam", minimum=0.0)
    learning_rate_scale: float = setting(0.7, "a constant factor on the paper's learning-rate schedule", above=0.0)
    schedule: str = setting("inverse_sqrt", "after the warm-up: the paper's inverse square root, or a linear fall that "
                            "reaches 0 when the time budget (minutes) or the epochs run out, from the paper's peak",
                            choices=SCHEDULES)
    epochs: int = setting(30, "the most epochs to train", minimum=1)
    steps_per_epoch: int = setting(0, "steps between checkpoints; 0: one pass over the training data", minimum=0)
    minutes: float = setting(55.0, "training time budget in minutes (checked at every step)", above=0.0)
    average_last: int = setting(5, "epoch checkpoints averaged into the final model (1: the last one alone)",
                                minimum=1)
    ema_momentum: float = setting(0.0, "Polyak averaging: a moving average of the weights with this momentum per "
                                  "step (kzoo.train.MovingAverage), saved every epoch; the final model is the average "
                                  "at the last epoch's end instead of the last checkpoints averaged; 0: off",
                                  minimum=0.0, below=1.0)
    patience: int = setting(4, "epochs without a better validation loss before training stops", minimum=1)
    dtype: str = setting("float32", "Keras dtype policy", choices=DTYPES)
    beam_size: int = setting(4, "beam search: hypotheses kept per sentence", minimum=1)
    length_penalty: float = setting(0.6, "beam search: GNMT length penalty alpha (0 scores plain log-probability)",
                                    minimum=0.0)
    early_stopping: bool = setting(False, "beam search: a sentence is done once beam_size hypotheses have ended "
                                   "(CTranslate2's rule), not when none alive can beat its best (exact)")
    seed: int = setting(1337, "random seed of the weights, the batches and dropout", minimum=0)

    @classmethod
    def from_preset(cls, name, **overrides):
        """The configuration named `name` in `PRESETS`, with `overrides` (field values) on top.

        Example:
        ```python
        from kzoo.train.translation_recipe import TranslationConfig

        config = TranslationConfig.from_preset("multi30k_hour", seed=7)
        config.beam_size, config.minutes, config.seed  # (4, 60.0, 7)
        ```
        """
        if name not in PRESETS:
            raise ValueError(f"TranslationConfig: no preset named {name!r}; the presets are {sorted(PRESETS)}.")
        return cls(**{**PRESETS[name], **overrides})

    def __post_init__(self):
        check_settings(self)
        if self.hidden_dim % self.num_heads:
            raise ValueError(f"TranslationConfig: hidden_dim={self.hidden_dim} is not divisible by "
                             f"num_heads={self.num_heads}; pick num_heads that divides the model width.")
        if self.max_tokens <= self.max_length:
            raise ValueError(f"TranslationConfig: max_tokens={self.max_tokens} must exceed max_length="
                             f"{self.max_length}, so that a batch holds at least one sentence of the longest kind.")


def build_model(config, vocabulary_size):
    """The untrained `Transformer` a configuration describes, for a vocabulary of `vocabulary_size` pieces.

    Example:
    ```python
    from kzoo.train.translation_recipe import TranslationConfig, build_model

    build_model(TranslationConfig(), vocabulary_size=8000).count_params()  # 7577600
    ```
    """
    from kzoo.models import transformer_small

    return transformer_small(
        vocabulary_size=vocabulary_size,
        num_encoder_layers=config.encoder_layers,
        num_decoder_layers=config.decoder_layers,
        hidden_dim=config.hidden_dim,
        num_heads=config.num_heads,
        intermediate_dim=config.intermediate_dim,
        dropout=config.dropout,
        max_sequence_length=config.max_length,
        dtype=config.dtype,
    )


def compile_model(model, config):
    """Compile `model` as the recipe trains it: Adam(0.9, 0.98, 1e-9) on the paper's warm-up schedule (with
    `schedule="linear_to_budget"` at the schedule's peak rate, which `schedule_callbacks` then sets step by step), the
    label-smoothed cross-entropy over real tokens, and token accuracy. With `weight_decay`, AdamW instead: every
    weight matrix and embedding shrinks by `learning_rate · weight_decay` of itself each step; biases and layer-norm
    parameters do not (nanoGPT's split).

    Example:
    ```python
    from kzoo.train.translation_recipe import TranslationConfig, build_model, compile_model

    config = TranslationConfig(encoder_layers=1, decoder_layers=1, hidden_dim=32, num_heads=2, intermediate_dim=64)
    model = build_model(config, vocabulary_size=300)
    compile_model(model, config)
    model.loss.label_smoothing  # 0.1
    ```
    """
    import keras

    from kzoo.metrics import MaskedAccuracy
    from kzoo.models.weight_decay import decay_weights_only
    from kzoo.train.losses import MaskedCrossEntropy
    from kzoo.train.schedules import TransformerSchedule

    schedule = TransformerSchedule(config.hidden_dim, config.warmup_steps, config.learning_rate_scale)
    if config.schedule == "linear_to_budget":
        schedule = peak_learning_rate(config)
    adam = {"beta_1": 0.9, "beta_2": 0.98, "epsilon": 1e-9}  # the paper's
    if config.weight_decay:
        optimizer = decay_weights_only(keras.optimizers.AdamW(schedule, weight_decay=config.weight_decay, **adam))
    else:
        optimizer = keras.optimizers.Adam(schedule, **adam)
    model.compile(
        optimizer=optimizer,
        loss=MaskedCrossEntropy(config.label_smoothing),
        metrics=[MaskedAccuracy()],
    )


def peak_learning_rate(config):
    """The paper's schedule's highest rate, at the end of the warm-up: `scale · d_model^-0.5 · warmup_steps^-0.5`.

    Example:
    ```python
    from kzoo.train.translation_recipe import TranslationConfig, peak_learning_rate

    round(peak_learning_rate(TranslationConfig()), 6)  # 0.001383: 0.7 · 256^-0.5 · 1000^-0.5
    ```
    """
    return config.learning_rate_scale * config.hidden_dim**-0.5 * config.warmup_steps**-0.5


def schedule_callbacks(config, steps_per_epoch):
    """The callbacks the configuration's learning-rate schedule needs during `fit`: none for the paper's schedule
    (the optimizer holds it), `kzoo.train.LinearDecayToBudget` for "linear_to_budget", whose fall reaches 0 at the
    time budget or after `config.epochs` epochs of `steps_per_epoch` steps, whichever comes first.

    Example:
    ```python
    from kzoo.train.translation_recipe import TranslationConfig, schedule_callbacks

    [decay] = schedule_callbacks(TranslationConfig(schedule="linear_to_budget", epochs=20), steps_per_epoch=282)
    decay.total_steps, decay.seconds, decay.warmup_steps  # (5640, 3300.0, 1000)
    ```
    """
    if config.schedule == "inverse_sqrt":
        return []
    from kzoo.train.callbacks import LinearDecayToBudget

    return [LinearDecayToBudget(peak_learning_rate(config), config.warmup_steps, minutes=config.minutes,
                                total_steps=config.epochs * steps_per_epoch)]


def translator(model, tokenizer, config, method="beam"):
    """The `kzoo.translator.Translator` that decodes `model` as the run of `config` does (its beam size, length
    penalty and source length), with `method` "beam" or "greedy".

    Example:
    ```python
    from kzoo.train.translation_recipe import TranslationConfig, build_model, translator

    config = TranslationConfig.from_preset("multi30k_hour", encoder_layers=1, decoder_layers=1, hidden_dim=16,
                                           num_heads=2, intermediate_dim=32, vocabulary_size=300)
    tokenizer = kzoo.text.SubwordTokenizer.train(["A dog runs.", "Ein Hund läuft."] * 20, vocabulary_size=300)
    translator(build_model(config, tokenizer.vocabulary_size), tokenizer, config).beam_size  # 4
    ```
    """
    from kzoo.translator import Translator

    return Translator(model, tokenizer, method=method, beam_size=config.beam_size,
                      length_penalty=config.length_penalty, early_stopping=config.early_stopping,
                      max_source_length=config.max_length)


def score(translator, sources, references, batch_size=64):
    """BLEU and chrF of `translator` on aligned source and reference sentences, with the seconds it took, and the
    translations.

    Example:
    ```python
    from kzoo.text import SubwordTokenizer
    from kzoo.train.translation_recipe import score
    from kzoo.translator import Translator

    english, german = kzoo.data.multi30k("val")
    tokenizer = SubwordTokenizer.train(english[:300] + german[:300], vocabulary_size=400)
    model = kzoo.models.Transformer(tokenizer.vocabulary_size, num_encoder_layers=1, num_decoder_layers=1,
                                    hidden_dim=16, num_heads=2, intermediate_dim=32)
    scores, translations = score(Translator(model, tokenizer, method="greedy"), english[:4], german[:4])
    sorted(scores)  # ["bleu", "bleu_lowercase", "bleu_signature", "chrf", "seconds"]; an untrained model scores about 0
    ```
    """
    import time

    from kzoo.train.quality import translation_scores

    start = time.monotonic()
    hypotheses = translator.translate(sources, batch_size=batch_size)
    scores = translation_scores(hypotheses, references)
    scores["seconds"] = round(time.monotonic() - start, 1)
    return scores, hypotheses


def _check_pairs(name, pairs):
    sources, targets = pairs
    if not sources or len(sources) != len(targets):
        raise ValueError(f"The {name} split has {len(sources)} source and {len(targets)} target sentences; it needs "
                         "at least one aligned pair.")


def train(config, output, train_pairs=None, val_pairs=None, test_pairs=None, resume=False, replace=False, verbose=1,
          methods=("greedy", "beam"), args=None):
    """Run the whole recipe into the run folder `output`; returns (model, tokenizer, scores), the scores also
    written to output/scores.json.

    `train_pairs`, `val_pairs`, `test_pairs` are (sources, targets) lists; they default to the shipped Multi30k
    train, val and test_2016_flickr splits (pass `test_pairs=()` to score no test split). See `kzoo.train.run.Run`
    for `resume` and `replace`.

    Example:
    ```python
    import tempfile
    from kzoo.train.translation_recipe import TranslationConfig, train

    english, german = kzoo.data.multi30k("val")
    config = TranslationConfig(vocabulary_size=400, encoder_layers=1, decoder_layers=1, hidden_dim=16, num_heads=2,
                               intermediate_dim=32, max_tokens=256, max_length=24, epochs=1, steps_per_epoch=2)
    model, tokenizer, scores = train(config, tempfile.mkdtemp() + "/run", (english[:200], german[:200]),
                                     (english[200:216], german[200:216]), test_pairs=(), verbose=0,
                                     methods=("greedy",))
    scores["steps"], sorted(scores["val_greedy"])[:2]  # (2, ["bleu", "bleu_lowercase"])
    ```
    """
    import csv
    import time

    import tensorflow as tf

    from kzoo.data import multi30k
    from kzoo.text import SubwordTokenizer, translation_batches
    from kzoo.train.callbacks import average_weights
    from kzoo.train.distribution import strategy
    from kzoo.train.run import Run

    train_pairs = train_pairs if train_pairs is not None else multi30k("train")
    val_pairs = val_pairs if val_pairs is not None else multi30k("val")
    test_pairs = test_pairs if test_pairs is not None else multi30k("test_2016_flickr")
    for name, pairs in (("training", train_pairs), ("validation", val_pairs)):
        _check_pairs(name, pairs)

    with Run(output, MODULE, config, resume=resume, replace=replace) as run:
        started = time.monotonic()
        if run.resumed:
            tokenizer = SubwordTokenizer.load(run.file("tokenizer.model"))
        else:
            print(f"learning a {config.vocabulary_size}-piece joint vocabulary from {len(train_pairs[0])} pairs",
                  flush=True)
            tokenizer = SubwordTokenizer.train(train_pairs[0] + train_pairs[1], vocabulary_size=config.vocabulary_size)
            tokenizer.save(run.file("tokenizer.model"))  # a resumed run needs it; the run is not finished until the end
        train_data = translation_batches(tokenizer, *train_pairs, max_tokens=config.max_tokens,
                                         max_length=config.max_length, seed=config.seed,
                                         subword_dropout=config.subword_dropout)
        val_data = translation_batches(tokenizer, *val_pairs, max_tokens=config.max_tokens,
                                       max_length=config.max_length, shuffle=False)
        # Bucketing hides the number of batches from Keras; one pass finds it (with subword dropout the count varies a
        # little from pass to pass, so an "epoch" is then that many steps of a repeated stream). Keras warns that the
        # input "ran out of data" at the end of every evaluation over a dataset of unknown length, so the validation
        # set says its own.
        steps_per_epoch = config.steps_per_epoch or sum(1 for _ in train_data)
        val_data = val_data.apply(tf.data.experimental.assert_cardinality(sum(1 for _ in val_data)))

        with strategy().scope():
            model = build_model(config, tokenizer.vocabulary_size)
            compile_model(model, config)
        print(f"model: {model.count_params():,} parameters, dtype policy {config.dtype}; {steps_per_epoch} steps "
              "an epoch", flush=True)
        model.fit(
            train_data.repeat(),
            steps_per_epoch=steps_per_epoch,
            shuffle=False,  # the pipeline shuffles; Keras cannot shuffle a tf.data.Dataset
            validation_data=val_data,
            epochs=config.epochs,
            verbose=verbose,
            callbacks=run.callbacks(minutes=config.minutes,
                                    early_stopping={"monitor": "val_loss", "patience": config.patience},
                                    moving_average=config.ema_momentum or None)
            + schedule_callbacks(config, steps_per_epoch),
        )
        train_seconds = time.monotonic() - started
        with open(run.file("history.csv")) as file:
            history = list(csv.DictReader(file))

        if config.ema_momentum > 0:
            last = run.moving_average_checkpoints()[-1]
            print(f"the final model is the moving average of the weights at the end of the last epoch: {last.name} "
                  "(average_last is not used)", flush=True)
            model.load_weights(last)
        else:
            checkpoints = run.checkpoints()[-config.average_last:]
            if len(checkpoints) > 1:
                print(f"averaging the last {len(checkpoints)} checkpoints: {[p.name for p in checkpoints]}",
                      flush=True)
                average_weights(model, [str(p) for p in checkpoints])
        with run.artifact("model.keras") as path:
            model.save(path)

        results = {"epochs": len(history), "steps": int(model.optimizer.iterations),
                   "train_minutes": round(train_seconds / 60, 1),
                   "val_loss": [round(float(row["val_loss"]), 4) for row in history]}
        splits = {"val": val_pairs, **({"test_2016_flickr": test_pairs} if test_pairs else {})}
        for method in methods:
            decoder = translator(model, tokenizer, config, method)
            for split, (sources, references) in splits.items():
                scores, hypotheses = score(decoder, sources, references)
                results[f"{split}_{method}"] = scores
                run.write_text(f"{split}_{method}.de", "\n".join(hypotheses) + "\n")
                print(f"{split} {method}: BLEU {scores['bleu']} chrF {scores['chrf']} ({scores['seconds']} s)",
                      flush=True)
        results["total_minutes"] = round((time.monotonic() - started) / 60, 1)
        run.write_json("scores.json", results)
    return model, tokenizer, results


def main(argv=None):
    """`python -m kzoo.train.translation_recipe --output RUN [flags]`: `train` from the command line.

    Example:
    ```python
    import subprocess, sys
    help_text = subprocess.run([sys.executable, "-m", "kzoo.train.translation_recipe", "--help"],
                               capture_output=True, text=True).stdout
    "--dropout DROPOUT" in help_text and "(default: 0.1)" in help_text  # True
    ```
    """
    parser = recipe_parser(MODULE, TranslationConfig, __doc__.split("\n\n")[0], presets=PRESETS)
    parser.add_argument("--train", nargs=2, metavar=("SOURCE", "TARGET"),
                        help="parallel training files (default: the shipped Multi30k train split)")
    parser.add_argument("--val", nargs=2, metavar=("SOURCE", "TARGET"),
                        help="parallel validation files (default: Multi30k val)")
    parser.add_argument("--test", nargs=2, metavar=("SOURCE", "TARGET"),
                        help="parallel test files (default: Multi30k test_2016_flickr, unless --train is given)")
    parser.add_argument("--no-test", action="store_true", help="score no test split (validation only)")

    def train_from_arguments(config, output, args, **options):
        from kzoo.data import read_parallel

        pairs = {split: read_parallel(*getattr(args, split)) if getattr(args, split) else None
                 for split in ("train", "val", "test")}
        if args.no_test or (args.train and not args.test):
            pairs["test"] = ()
        return train(config, output, pairs["train"], pairs["val"], pairs["test"], **options)

    run_recipe(MODULE, TranslationConfig, train_from_arguments, None, argv, parser=parser)


if __name__ == "__main__":
    main()
