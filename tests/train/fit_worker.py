"""One training run of the distribution and fault-tolerance tests: a tiny model of kzoo layers (token embedding,
sinusoidal positions, one encoder block, dropout off) learns to reverse sequences with `fit`, then `evaluate`s and
`predict`s, inside `kzoo.train.strategy()` (multi-worker when the test sets TF_CONFIG). As a script it saves what
the tests compare to OUT (.npz); the tests also call `train` in their own process for a single-device reference.

    python tests/train/fit_worker.py OUT [--kind mirrored --logical-cpus 2] [--backup DIR] [--save-freq epoch|N]
                                         [--pause-at STEP --marker PATH] [--jit-compile true|false|auto]
                                         [--steps-per-execution N]

--pause-at makes the process stop after that training step and wait to be killed, the first time only: it creates
--marker, and a run that finds the marker trains on. So the same command, run twice, is killed once and resumes.
"""

import argparse
import json
import os
import pathlib
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import kzoo  # noqa: E402
from kzoo.layers import EncoderBlock, SinusoidalPositionEncoding, TokenEmbedding  # noqa: E402

EXAMPLES, LENGTH, VOCABULARY, GLOBAL_BATCH, EPOCHS = 32, 6, 12, 8, 4  # 4 steps per epoch, 16 in all


def reversal_data():
    """Token ids 1..11, no padding: every replica's loss averages the same number of tokens."""
    source = np.random.default_rng(0).integers(1, VOCABULARY, size=(EXAMPLES, LENGTH))
    return source, source[:, ::-1].copy()


def build_model():
    token_ids = keras.Input((LENGTH,), dtype="int32", name="token_ids")
    x = TokenEmbedding(VOCABULARY, 16)(token_ids)
    x = x + SinusoidalPositionEncoding()(x)
    x = EncoderBlock(num_heads=2, intermediate_dim=32, dropout=0.0)(x)
    return keras.Model(token_ids, keras.layers.Dense(VOCABULARY)(x))


class PauseForKill(keras.callbacks.Callback):
    """After training step `step`, create `marker` and wait to be killed, unless `marker` exists already."""

    def __init__(self, step, marker):
        super().__init__()
        self.step, self.marker = step, pathlib.Path(marker)

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == self.step and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            time.sleep(600)


class CountSteps(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.steps = 0

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1


def train(kind=None, backup=None, save_freq="epoch", pause_at=None, marker=None, jit_compile="auto",
          steps_per_execution=1):
    """Train, evaluate and predict; returns the dict the script saves. `jit_compile` and `steps_per_execution` are
    asked of `kzoo.train.compile_options`, which keeps what the strategy can run."""
    keras.utils.set_random_seed(0)
    strategy = kzoo.train.strategy(kind)
    with strategy.scope():
        model = build_model()
        # SGD with momentum: the momenta are optimizer state a restore must bring back, and, unlike Adam, SGD does
        # not magnify float32 rounding in the gradients no weight depends on (the attention key bias).
        model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                      **kzoo.train.compile_options(strategy, jit_compile, steps_per_execution))
    x, y = reversal_data()
    counter = CountSteps()
    callbacks = [counter]
    backup_callback = kzoo.train.WorkerBackupAndRestore(backup, save_freq=save_freq) if backup else None
    if backup_callback:
        callbacks.insert(0, backup_callback)
    if pause_at:
        callbacks.append(PauseForKill(pause_at, marker))
    history = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=EPOCHS, shuffle=False, verbose=0, callbacks=callbacks)
    evaluation = model.evaluate(x, y, batch_size=GLOBAL_BATCH, verbose=0, return_dict=True)
    return {
        "weights": model.get_weights(),
        "losses": np.array(history.history["loss"]),
        "evaluate_loss": evaluation["loss"],
        "evaluate_accuracy": evaluation["accuracy"],
        "predictions": model.predict(x, batch_size=GLOBAL_BATCH, verbose=0),
        "iterations": int(model.optimizer.iterations.numpy()),
        "steps_run": counter.steps,
        "restored": json.dumps(backup_callback.restored if backup_callback else None),
        "replicas": strategy.num_replicas_in_sync,
        "optimizer": type(model.optimizer).__name__,
        "jit_compile": model.jit_compile,
        "steps_per_execution": model.steps_per_execution,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--kind", help="kzoo.train.strategy(kind)")
    parser.add_argument("--logical-cpus", type=int, help="split the CPU into this many logical devices")
    parser.add_argument("--backup", help="WorkerBackupAndRestore folder")
    parser.add_argument("--save-freq", default="epoch")
    parser.add_argument("--pause-at", type=int)
    parser.add_argument("--marker")
    parser.add_argument("--jit-compile", choices=("auto", "true", "false"), default="auto")
    parser.add_argument("--steps-per-execution", type=int, default=1)
    args = parser.parse_args()
    if args.logical_cpus:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.logical_cpus)
    save_freq = args.save_freq if args.save_freq == "epoch" else int(args.save_freq)
    jit_compile = {"auto": "auto", "true": True, "false": False}[args.jit_compile]
    result = train(args.kind, args.backup, save_freq, args.pause_at, args.marker, jit_compile,
                   args.steps_per_execution)
    weights = result.pop("weights")
    np.savez(args.out, *weights, **result)


if __name__ == "__main__":
    main()
