"""Pretrain a small BERT on WikiText-2 with masked-LM + next-sentence prediction.

    python -m kzoo.train.bert_pretraining_recipe --output runs/bert_pretraining

streams the shipped WikiText-2 articles, builds next-sentence pairs and masks 15% of
the pieces afresh every epoch (`kzoo.text.pretraining_dataset`), and trains `BertPretrainer` on a `bert_mini`-sized
backbone with AdamW and a warm-up/linear-decay schedule inside the strategy kzoo picks. It keeps a checkpoint per
epoch, TensorBoard logs, a CSV history and a progress bar, stops on the step or time budget, and writes the backbone
(`backbone.keras`, what fine-tuning loads), its vocabulary, the configuration and the final validation scores.
"""

import dataclasses
import json

from kzoo.data.wikitext import WIKITEXT2_VOCABULARY
from kzoo.train.recipe_config import check_settings, setting
from kzoo.train.run import run_recipe

MODULE = "kzoo.train.bert_pretraining_recipe"
PRESETS = ("bert_tiny", "bert_mini", "bert_small", "bert_medium", "bert_base", "bert_large")  # kzoo.models.bert_presets


@dataclasses.dataclass
class PretrainingConfig:
    """Everything a pretraining run depends on; printed at the start and saved in the run folder.

    Each field is a `--flag` of the command line (`main(["--help"])` lists them); a value outside what a field accepts
    is refused when the configuration is made, before any work.

    Example:
    ```python
    from kzoo.train.bert_pretraining_recipe import PretrainingConfig

    config = PretrainingConfig(train_steps=2000)
    config.preset, config.sequence_length, config.minutes  # ("bert_mini", 128, 40.0)
    try:
        PretrainingConfig(sequence_length=16)  # max_predictions stays 20
    except ValueError as error:
        print(error)  # PretrainingConfig: max_predictions=20 must be at most sequence_length - 3 = 13.
    ```
    """

    preset: str = setting("bert_mini", "the backbone's size (bert_mini: 4 layers, hidden 256, 4 heads)",
                          choices=PRESETS)
    vocabulary: str = setting(WIKITEXT2_VOCABULARY, "the WordPiece vocabulary (a vocab.txt; 'kzoo:NAME' is a file "
                                                    "kzoo ships), copied into the run")
    lowercase: bool = setting(True, "lowercase text (and strip accents) before WordPiece: the vocabulary is uncased")
    sequence_length: int = setting(128, "tokens per example, [CLS] and [SEP]s included", minimum=5)
    batch_size: int = setting(32, "examples per batch", minimum=1)
    max_predictions: int = setting(20, "most masked-LM targets per example", minimum=1)
    mask_rate: float = setting(0.15, "fraction of the tokens chosen as masked-LM targets", above=0.0, maximum=1.0)
    whole_word: bool = setting(False, "mask whole words (a piece and its ## pieces) instead of single pieces")
    learning_rate: float = setting(5e-4, "peak learning rate of the warm-up/linear-decay schedule", above=0.0)
    warmup_fraction: float = setting(0.1, "fraction of the steps spent warming up", minimum=0.0, below=1.0)
    train_steps: int = setting(5000, "optimizer steps in all", minimum=1)
    steps_per_epoch: int = setting(500, "steps between checkpoints and validations", minimum=1)
    validation_batches: int = setting(20, "batches of the fixed validation set", minimum=1)
    minutes: float = setting(40.0, "training time budget in minutes (checked at every step)", above=0.0)
    dropout: float = setting(0.1, "dropout of the backbone", minimum=0.0, below=1.0)
    seed: int = setting(1337, "random seed of the weights, the pairs, the masks and dropout", minimum=0)
    initial_weights: str = setting("", "a checkpoint (.weights.h5) of an earlier run of this recipe to continue "
                                       "from ('': a fresh backbone)")

    def __post_init__(self):
        check_settings(self)
        if self.max_predictions > self.sequence_length - 3:
            raise ValueError(f"PretrainingConfig: max_predictions={self.max_predictions} must be at most "
                             f"sequence_length - 3 = {self.sequence_length - 3}.")


def build_backbone(config, vocabulary_size):
    """The freshly initialised backbone the run pretrains.

    Example:
    ```python
    from kzoo.train.bert_pretraining_recipe import PretrainingConfig, build_backbone

    config = PretrainingConfig(preset="bert_tiny", sequence_length=16, max_predictions=3)
    backbone = build_backbone(config, vocabulary_size=100)
    backbone.num_layers, backbone.hidden_dim, backbone.max_sequence_length  # (2, 128, 16)
    ```
    """
    from kzoo.models.bert_presets import bert_preset

    return bert_preset(config.preset, vocabulary_size=vocabulary_size, max_sequence_length=config.sequence_length,
                       dropout=config.dropout)


def wikitext_articles(split):
    """A zero-argument function that streams the shipped WikiText-2 split, one article (a list of paragraphs) at a
    time: what `pretraining_dataset` reads every epoch.

    Example:
    ```python
    from kzoo.train.bert_pretraining_recipe import wikitext_articles

    articles = wikitext_articles("valid")
    first = next(iter(articles()))
    first[0][:35], sum(1 for _ in articles())  # ("Homarus gammarus , known as the Eur", 60): 60 articles
    ```
    """
    from kzoo.data.wikitext import wikitext2_file, wikitext_documents

    path = wikitext2_file(split)
    return lambda: wikitext_documents(path)


def text_preprocessor(config):
    """The run's `BertPreprocessor`: its vocabulary, lowercase setting and sequence length, which a task model
    fine-tuned from the run's backbone reads again from the run folder (vocab.txt, config.json).

    Example:
    ```python
    from kzoo.train.bert_pretraining_recipe import PretrainingConfig, text_preprocessor

    preprocessor = text_preprocessor(PretrainingConfig(sequence_length=16, max_predictions=3))
    preprocessor.sequence_length, preprocessor.vocabulary_size(), preprocessor.lowercase  # (16, 8192, True)
    ```
    """
    from kzoo.data.shipped import resolve_data_path
    from kzoo.text.bert_preprocessor import BertPreprocessor
    from kzoo.text.wordpiece import load_vocabulary

    vocabulary = load_vocabulary(resolve_data_path(config.vocabulary))  # checked for BERT's reserved tokens
    return BertPreprocessor(vocabulary, sequence_length=config.sequence_length, lowercase=config.lowercase)


def pretraining_batches(config, preprocessor, documents, seed):
    """The run's masked-LM and next-sentence batches (`kzoo.text.pretraining_dataset`) of `documents`, a
    zero-argument function returning an iterable of documents, with the configuration's batch size and masking.

    Example:
    ```python
    from kzoo.train.bert_pretraining_recipe import PretrainingConfig, pretraining_batches, text_preprocessor

    config = PretrainingConfig(sequence_length=16, batch_size=4, max_predictions=3)
    documents = [["The cat sat on the mat.", "It purred."], ["Dogs bark at night.", "The moon rose."]] * 4
    features, labels, sample_weights = next(iter(pretraining_batches(config, text_preprocessor(config),
                                                                     lambda: documents, seed=0)))
    tuple(features["token_ids"].shape), tuple(labels["mlm"].shape)  # ((4, 16), (4, 3))
    ```
    """
    from kzoo.text.pretraining_data import pretraining_dataset

    return pretraining_dataset(
        documents,
        preprocessor,
        batch_size=config.batch_size,
        max_predictions=config.max_predictions,
        mask_rate=config.mask_rate,
        whole_word=config.whole_word,
        seed=seed,
    )


def train(config, output, verbose=1, train_documents=None, validation_documents=None, resume=False, replace=False,
          args=None):
    """Run the whole recipe into the run folder `output`; returns the pretrainer, the Keras history and the scores
    dict also written to output/scores.json.

    `train_documents` / `validation_documents`: zero-argument functions returning iterables of documents (lists of
    paragraphs or sentences); they default to the shipped WikiText-2 train and valid splits. See
    `kzoo.train.run.Run` for `resume` and `replace`.

    Even a one-step run of `bert_tiny` on a few sentences (`PretrainingConfig(preset="bert_tiny",
    sequence_length=16, batch_size=4, max_predictions=3, train_steps=1, steps_per_epoch=1, validation_batches=1)`
    with `train_documents=lambda: documents, validation_documents=lambda: documents`) takes about 20 seconds on a
    CPU, most of it tracing; a vocabulary that is not there is refused before the run folder is made.

    Example:
    ```python
    import os, tempfile
    from kzoo.train.bert_pretraining_recipe import PretrainingConfig, train

    output = tempfile.mkdtemp() + "/bert_pretraining"
    try:
        train(PretrainingConfig(vocabulary="my_vocab.txt"), output)
    except FileNotFoundError as error:
        print(error)  # my_vocab.txt does not exist: expected a WordPiece vocabulary, one token a line.
    assert not os.path.exists(output)
    ```
    """
    import math
    import shutil
    import time

    import keras
    import tensorflow as tf

    from kzoo.data.shipped import resolve_data_path
    from kzoo.models import BertPretrainer
    from kzoo.train.distribution import strategy
    from kzoo.train.run import Run
    from kzoo.train.schedules import WarmupLinearDecay

    preprocessor = text_preprocessor(config)
    with Run(output, MODULE, config, resume=resume, replace=replace) as run:
        started = time.monotonic()
        if run.chief:
            shutil.copyfile(resolve_data_path(config.vocabulary), run.file("vocab.txt"))
        train_data = pretraining_batches(config, preprocessor, train_documents or wikitext_articles("train"),
                                         config.seed)
        # A fixed validation set: the same pairs and masks at every evaluation. Its size must be known to Keras: on
        # a dataset of unknown cardinality, Keras 3.15's evaluate reports each output's loss N/(N+1) of its value.
        validation_data = (
            pretraining_batches(config, preprocessor, validation_documents or wikitext_articles("valid"),
                                config.seed + 1)
            .take(config.validation_batches)
            .cache()
            .apply(tf.data.experimental.assert_cardinality(config.validation_batches))
        )

        with strategy().scope():
            pretrainer = BertPretrainer(build_backbone(config, preprocessor.vocabulary_size()))
            warmup_steps = int(config.warmup_fraction * config.train_steps)
            schedule = WarmupLinearDecay(config.learning_rate, config.train_steps, warmup_steps)
            pretrainer.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01, epsilon=1e-6))
            if config.initial_weights:
                pretrainer.load_weights(config.initial_weights)  # the model's weights; the optimizer starts afresh
        print(f"pretrainer: {pretrainer.count_params():,} parameters "
              f"(backbone {pretrainer.backbone.count_params():,})", flush=True)

        history = pretrainer.fit(
            train_data.repeat(),
            steps_per_epoch=config.steps_per_epoch,
            epochs=math.ceil(config.train_steps / config.steps_per_epoch),
            validation_data=validation_data,
            shuffle=False,  # the pipeline shuffles; Keras cannot shuffle a tf.data.Dataset
            verbose=verbose,
            callbacks=run.callbacks(minutes=config.minutes, total_steps=config.train_steps),
        )
        with run.artifact("backbone.keras") as path:
            pretrainer.backbone.save(path)
        results = {
            "steps": int(pretrainer.optimizer.iterations),
            "train_minutes": round((time.monotonic() - started) / 60, 1),
            **{name: round(values[-1], 4) for name, values in history.history.items()},
        }
        print("final:", json.dumps(results), flush=True)
        run.write_json("scores.json", results)
    return pretrainer, history, results


def main(argv=None):
    """`python -m kzoo.train.bert_pretraining_recipe --output RUN [flags]`: `train` from the command line.

    Example:
    ```python
    import contextlib, io
    from kzoo.train.bert_pretraining_recipe import main

    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text):
        try:
            main(["--help"])
        except SystemExit as exit:
            assert exit.code == 0  # argparse exits after printing the help
    "--whole-word" in help_text.getvalue() and "--preset {bert_tiny," in help_text.getvalue()  # True
    ```
    """
    run_recipe(MODULE, PretrainingConfig, train, __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    main()
