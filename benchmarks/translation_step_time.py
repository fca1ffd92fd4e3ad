"""Training step time of the translation recipe's model on its own batches (issue 21: how many steps an hour buys).

The recipe's `build_model` and `compile_model` for a configuration (the recipe's flags as JSON: the fields that
differ from `TranslationConfig`'s defaults), trained by `model.fit` on the recipe's length-bucketed Multi30k batches
(`translation_batches`, the real mix of shapes) for `--epochs` epochs of `--steps` steps each. The first epoch holds
the tracing; each later epoch's milliseconds a step are printed, and their median. TensorFlow's thread pools follow
TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS, so two such processes pinned to one core each (`taskset -c 0`,
`taskset -c 1`) measure two study runs side by side. Nothing is written: the figures are quoted in RESULTS.md beside
this command, with the machine and its load.

Usage:
    .venv/bin/python benchmarks/translation_step_time.py
    .venv/bin/python benchmarks/translation_step_time.py --config '{"hidden_dim": 128, "intermediate_dim": 256,
        "encoder_layers": 4, "decoder_layers": 4}' --jit-compile off
"""

import argparse
import json
import os
import statistics
import time

from results_file import environment_line, machine_load

JIT = {"auto": "auto", "on": True, "off": False}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="{}", help="TranslationConfig fields as JSON (default: the defaults)")
    parser.add_argument("--jit-compile", choices=tuple(JIT), default="auto",
                        help="Keras's jit_compile for the training step (the recipe leaves it at auto)")
    parser.add_argument("--steps", type=int, default=40, help="steps an epoch")
    parser.add_argument("--epochs", type=int, default=4, help="epochs; the first is not counted")
    parser.add_argument("--train-pairs", type=int, help="only the first N training pairs (a smoke run)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.epochs < 2:
        parser.error(f"--steps {args.steps} --epochs {args.epochs}: at least one step and two epochs are needed")

    import keras

    from kzoo.data import multi30k
    from kzoo.text import SubwordTokenizer, translation_batches
    from kzoo.train.translation_recipe import TranslationConfig, build_model, compile_model

    config = TranslationConfig(**json.loads(args.config))
    english, german = (side[: args.train_pairs] for side in multi30k("train"))
    tokenizer = SubwordTokenizer.train(english + german, vocabulary_size=config.vocabulary_size)
    batches = translation_batches(tokenizer, english, german, max_tokens=config.max_tokens,
                                  max_length=config.max_length, seed=config.seed)
    model = build_model(config, tokenizer.vocabulary_size)
    compile_model(model, config)
    if args.jit_compile != "auto":
        model.jit_compile = JIT[args.jit_compile]  # before the first step, so the train function is built with it

    seconds = []

    class EpochTimes(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            seconds.append(time.perf_counter() - self.start)

    before = os.getloadavg()
    model.fit(batches.repeat(), steps_per_epoch=args.steps, epochs=args.epochs, verbose=0, callbacks=[EpochTimes()])
    after = os.getloadavg()
    counted = [round(1000 * s / args.steps) for s in seconds[1:]]
    threads = (os.environ.get("TF_NUM_INTRAOP_THREADS", "default"), os.environ.get("TF_NUM_INTEROP_THREADS", "default"))
    print(environment_line())
    print(f"config {args.config}, jit_compile {args.jit_compile} ({model.jit_compile}), "
          f"{model.count_params():,} parameters, intra/inter-op threads {threads[0]}/{threads[1]}: ms a step per "
          f"epoch {counted} (first epoch, with tracing, {round(1000 * seconds[0] / args.steps)}), "
          f"median {statistics.median(counted):g}")
    print(machine_load(before, after) + ".")


if __name__ == "__main__":
    main()
