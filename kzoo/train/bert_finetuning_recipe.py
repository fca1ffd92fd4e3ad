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

import dataclasses

from kzoo.data.wikitext import WIKITEXT2_VOCABULARY
from kzoo.train.recipe_config import check_settings, setting
from kzoo.train.run import run_recipe

MODULE = "kzoo.train.bert_finetuning_recipe"
PRESETS = ("bert_tiny", "bert_mini", "bert_small", "bert_medium", "bert_base", "bert_large")  # kzoo.models.bert_presets
POOLINGS = ("pooled", "mean")

TASK_SEQUENCE_LENGTHS = {"sst2": 64, "mrpc": 128}  # SST-2 sentences fit in 64 pieces; MRPC pairs need 128


@dataclasses.dataclass
class FinetuningConfig:
    """Everything a fine-tuning run depends on; printed at the start and saved in the run folder.

    Each field is a `--flag` of the command line (`main(["--help"])` lists them); a value outside what a field accepts
    is refused when the configuration is made, before any work.

    Example:
    ```python
    from kzoo.train.bert_finetuning_recipe import FinetuningConfig

    config = FinetuningConfig(task="mrpc", epochs=5)
    config.preset, config.sequence_length, config.batch_size  # ("bert_mini", 0, 32): 0 is the task's 128 tokens
    try:
        FinetuningConfig(checkpoint="all-MiniLM-L6-v2", backbone="runs/bert_pretraining")
    except ValueError as error:
        print(error)  # FinetuningConfig: checkpoint='all-MiniLM-L6-v2' and backbone=...: give one of them.
    ```
    """

    task: str = setting("sst2", "the GLUE task", choices=tuple(TASK_SEQUENCE_LENGTHS))
    backbone: str = setting("", "a run of kzoo's pretraining recipe (its folder or backbone.keras), which brings "
                                "its vocabulary; '': none")
    checkpoint: str = setting("", "a public BERT checkpoint (Hugging Face or Google folder, or release name), which "
                                  "brings its own tokenizer; '': none")
    preset: str = setting("bert_mini", "the size of a randomly initialised backbone (no --backbone or --checkpoint)",
                          choices=PRESETS)
    vocabulary: str = setting(WIKITEXT2_VOCABULARY, "the WordPiece vocabulary of a randomly initialised backbone "
                                                    "('kzoo:NAME' is a file kzoo ships)")
    sequence_length: int = setting(0, "tokens per example, special tokens included; 0: the task's default "
                                      f"({TASK_SEQUENCE_LENGTHS})", minimum=0)
    batch_size: int = setting(32, "examples per batch", minimum=1)
    learning_rate: float = setting(1e-4, "peak learning rate of the warm-up/linear-decay schedule", above=0.0)
    warmup_fraction: float = setting(0.1, "fraction of the steps spent warming up", minimum=0.0, below=1.0)
    epochs: int = setting(3, "epochs (dev scores after each)", minimum=1)
    train_steps: int = setting(0, "0: `epochs` full passes; else exactly this many steps, spread over the epochs",
                               minimum=0)
    train_examples: int = setting(0, "0: the whole training split; else its first this many examples", minimum=0)
    dev_examples: int = setting(0, "0: the whole dev split; else its first this many examples", minimum=0)
    dropout: float = setting(0.1, "dropout of the backbone and the head", minimum=0.0, below=1.0)
    seed: int = setting(1337, "random seed of the head, the batches and dropout", minimum=0)
    trim_padding: bool = setting(False, "cut each batch to its longest example (same outputs, less work)")
    group_by_length: bool = setting(False, "training batches of similar-length examples (with --trim-padding: "
                                           "less padding)")
    pooling: str = setting("pooled", "the head reads BERT's [CLS] pooler or the mean of the last layer",
                           choices=POOLINGS)
    freeze_token_embedding: bool = setting(False, "keep the pretrained token embedding table as it is")
    layer_decay: float = setting(1.0, "each encoder block down learns this times slower than the one above "
                                      "(1: no decay)", above=0.0, maximum=1.0)
    ema_momentum: float = setting(0.0, "> 0: keep this exponential moving average of the weights and end on it "
                                       "(0.999 averages about the last 1000 steps; 0: off)", minimum=0.0, below=1.0)

    def __post_init__(self):
        check_settings(self)
        if self.checkpoint and self.backbone:
            raise ValueError(f"FinetuningConfig: checkpoint={self.checkpoint!r} and backbone={self.backbone!r}: "
                             "give one of them.")
        if 0 < self.sequence_length < 4:
            raise ValueError(f"FinetuningConfig: sequence_length={self.sequence_length} leaves no room for text; pass "
                             "4 or more, or 0 for the task's default.")


def backbone_and_preprocessor(config):
    """The backbone the run fine-tunes, with the run's dropout, and the `BertPreprocessor` that tokenizes for it:
    a public checkpoint's (`config.checkpoint`), a kzoo pretraining run's (`config.backbone`), or, for the
    from-scratch baseline, a fresh one of the preset's size with `config.vocabulary` and the pretraining recipe's 128
    positions; all resolved by `kzoo.models.bert_pretrained.pretrained_bert`.

    Example:
    ```python
    from kzoo.train.bert_finetuning_recipe import FinetuningConfig, backbone_and_preprocessor

    backbone, preprocessor = backbone_and_preprocessor(FinetuningConfig(preset="bert_tiny", sequence_length=16))
    backbone.num_layers, backbone.hidden_dim, backbone.dropout  # (2, 128, 0.1): a fresh bert_tiny
    preprocessor.sequence_length, preprocessor.vocabulary_size()  # (16, 8192): the shipped WikiText-2 vocabulary
    ```
    """
    from kzoo.models.bert_pretrained import pretrained_bert

    if config.checkpoint or config.backbone:
        return pretrained_bert(config.checkpoint or config.backbone, config.sequence_length, dropout=config.dropout)
    return pretrained_bert(config.preset, config.sequence_length, vocabulary=config.vocabulary,
                           max_sequence_length=128, dropout=config.dropout)


def text_batches(config, preprocessor):
    """A function making the task's batches from texts with the run's preprocessor.

    Example:
    ```python
    from kzoo.text import BertPreprocessor
    from kzoo.train.bert_finetuning_recipe import FinetuningConfig, text_batches

    preprocessor = BertPreprocessor(kzoo.data.shipped_file("wikitext2/vocab.txt"), sequence_length=16)
    batches = text_batches(FinetuningConfig(batch_size=2, trim_padding=True), preprocessor)
    features, labels = next(iter(batches(["a gripping film", "dull"], [1, 0])))
    sorted(features), labels.numpy().tolist()  # (["padding_mask", "segment_ids", "token_ids"], [1, 0])
    assert features["token_ids"].shape[0] == 2 and features["token_ids"].shape[1] < 16  # trimmed to the longest
    ```
    """
    from kzoo.text.classification_batches import preprocessed_dataset

    def batches(texts, labels, **options):
        return preprocessed_dataset(texts, labels, preprocessor, config.batch_size, trim_padding=config.trim_padding,
                                    **options)

    return batches


def dev_scores(classifier, dataset, labels):
    """Accuracy and F1 of the positive class (1) on a dataset, from the argmax of the logits.

    Example:
    ```python
    from kzoo.train.bert_finetuning_recipe import dev_scores

    classifier = keras.Sequential([keras.Input((1,)), keras.layers.Dense(2, use_bias=False)])
    classifier.set_weights([np.array([[-1.0, 1.0]])])  # logits (-x, x): class 1 where x > 0
    dataset = tf.data.Dataset.from_tensor_slices(np.array([[1.0], [-1.0], [-1.0], [2.0]])).batch(2)
    dev_scores(classifier, dataset, [1, 0, 1, 1])  # {"accuracy": 0.75, "f1": 0.8}: one positive missed
    ```
    """
    import numpy as np

    from kzoo.metrics import SparseF1Score

    logits = classifier.predict(dataset, verbose=0)
    f1 = SparseF1Score()
    f1.update_state(np.asarray(labels), logits)
    return {
        "accuracy": round(float(np.mean(np.argmax(logits, axis=-1) == np.asarray(labels))), 4),
        "f1": round(float(f1.result()), 4),
    }


def train(config, output, resume=False, replace=False, verbose=1, args=None):
    """Run the whole recipe into the run folder `output`; returns the classifier and the scores dict also written
    to output/scores.json. See `kzoo.train.run.Run` for `resume` and `replace`.

    A run too small to take a step is refused before the run folder is made; even a one-step run of `bert_tiny`
    (`FinetuningConfig(preset="bert_tiny", sequence_length=16, batch_size=8, epochs=1, train_steps=1,
    train_examples=8, dev_examples=8)`) takes about 20 seconds on a CPU, most of it tracing.

    Example:
    ```python
    import os, tempfile
    from kzoo.train.bert_finetuning_recipe import FinetuningConfig, train

    output = tempfile.mkdtemp() + "/sst2"
    try:
        train(FinetuningConfig(train_examples=8), output)
    except ValueError as error:
        print(error)  # The sst2 training split has 8 examples, fewer than one batch of batch_size=32: ...
    assert not os.path.exists(output)
    ```
    """
    import math
    import time

    import keras

    from kzoo.data.glue import glue
    from kzoo.metrics import SparseF1Score
    from kzoo.models import BertClassifier
    from kzoo.train.distribution import strategy
    from kzoo.train.optimizers import LayerwiseAdamW, bert_layer_decay
    from kzoo.train.run import Run
    from kzoo.train.schedules import WarmupLinearDecay

    # The run folder records the length the run used, so that an export of it tokenizes the same way.
    config = dataclasses.replace(config, sequence_length=config.sequence_length or TASK_SEQUENCE_LENGTHS[config.task])
    train_split, dev_split = glue(config.task, "train"), glue(config.task, "dev")
    train_split = train_split._replace(**{
        name: value[: config.train_examples or None] if value is not None else None
        for name, value in (("texts", train_split.texts), ("second_texts", train_split.second_texts),
                            ("labels", train_split.labels))
    })
    steps_per_pass = len(train_split.labels) // config.batch_size
    if steps_per_pass == 0:
        raise ValueError(f"The {config.task} training split has {len(train_split.labels)} examples, fewer than one "
                         f"batch of batch_size={config.batch_size}: the run would take no step. Use more "
                         "--train-examples or a smaller --batch-size.")
    total_steps = config.train_steps or config.epochs * steps_per_pass
    if total_steps < config.epochs:
        raise ValueError(f"train_steps={config.train_steps} is fewer than epochs={config.epochs}: every epoch needs "
                         "at least one step.")
    steps_per_epoch = math.ceil(total_steps / config.epochs)
    dev_labels = dev_split.labels[: config.dev_examples or None]
    dev_second = dev_split.second_texts[: len(dev_labels)] if dev_split.second_texts else None

    with Run(output, MODULE, config, resume=resume, replace=replace) as run:
        started = time.monotonic()
        with strategy().scope():
            backbone, preprocessor = backbone_and_preprocessor(config)
        batches = text_batches(config, preprocessor)
        train_data = batches(train_split.texts, train_split.labels, second_texts=train_split.second_texts,
                             shuffle=True, seed=config.seed, drop_remainder=True,
                             group_by_length=config.group_by_length)
        dev_data = batches(dev_split.texts[: len(dev_labels)], dev_labels, second_texts=dev_second)
        print(f"{config.task}: {len(train_split.labels)} training examples, {len(dev_labels)} dev; {total_steps} steps "
              f"of {config.batch_size} ({total_steps * config.batch_size / len(train_split.labels):.2f} passes)",
              flush=True)

        with strategy().scope():
            if config.pooling == "mean":
                backbone.pooler.trainable = False  # the head does not read the [CLS] pooler: nothing to train there
            if config.freeze_token_embedding:
                backbone.token_embedding.trainable = False
            # The preprocessor rides in classifier.keras, so the run's export tokenizes as the run did.
            classifier = BertClassifier(backbone, num_classes=len(train_split.label_names), dropout=config.dropout,
                                        pooling=config.pooling, label_names=train_split.label_names,
                                        preprocessor=preprocessor)
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
            callbacks=run.callbacks(total_steps=total_steps, checkpoints=False),
        )
        train_minutes = round((time.monotonic() - started) / 60, 1)
        with run.artifact("classifier.keras") as path:
            classifier.save(path)
        run.write_text("vocab.txt", "".join(f"{token}\n" for token in preprocessor.vocabulary))

        results = {
            "task": config.task,
            "backbone": config.checkpoint or config.backbone or "random",
            "steps": int(classifier.optimizer.iterations),
            "train_minutes": train_minutes,
            "dev_accuracy_per_epoch": [round(v, 4) for v in history.history["val_accuracy"]],
            "dev": dev_scores(classifier, dev_data, dev_labels),
        }
        print(f"{config.task} dev: accuracy {results['dev']['accuracy']:.4f}, F1 {results['dev']['f1']:.4f} "
              f"({train_minutes} min)", flush=True)
        run.write_json("scores.json", results)
    return classifier, results


def main(argv=None):
    """`python -m kzoo.train.bert_finetuning_recipe --task sst2 --output RUN [flags]`: `train` from the command line.

    Example:
    ```python
    import contextlib, io
    from kzoo.train.bert_finetuning_recipe import main

    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text):
        try:
            main(["--help"])
        except SystemExit as exit:
            assert exit.code == 0  # argparse exits after printing the help
    "--task {sst2,mrpc}" in help_text.getvalue() and "--layer-decay" in help_text.getvalue()  # True
    ```
    """
    run_recipe(MODULE, FinetuningConfig, train, __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    main()
