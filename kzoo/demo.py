"""kzoo's main job, `make demo`: train a small English→German Transformer on the shipped Multi30k, score it,
translate, export a raw-text SavedModel, and reload that in a fresh process that never imports kzoo."""

import argparse
import json
import pathlib
import subprocess
import sys
import time

EXAMPLES = [
    "A man in an orange hat starring at something.",
    "Two young children are playing in the sand on the beach.",
    "A woman is riding a bicycle down a city street.",
    "A black dog runs through the grass with a ball in its mouth.",
    "People are sitting at tables outside a café.",
]

SHIPPED_MODEL = "transformer_multi30k_en_de"
SHIPPED_NOTE = "55 minutes of training, 39.43 test BLEU"

RELOAD = """
import json, sys
import tensorflow as tf
import tensorflow_text  # the tf-text ops the graph uses; TF Serving links them in
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
out = serve(text=tf.constant(json.loads(sys.argv[2])))["translation"]
print(json.dumps({"translations": [t.decode() for t in out.numpy()], "kzoo_imported": "kzoo" in sys.modules}))
"""


def _shipped_translations(texts):
    """The shipped SavedModel's translations, for comparison with a few minutes of training (None if absent)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tf-text ops the graph uses)

    from kzoo.data import shipped_model
    from kzoo.serving.model_config import saved_model_versions

    try:
        model = shipped_model(SHIPPED_MODEL)
    except FileNotFoundError:
        return [None] * len(texts)
    serve = tf.saved_model.load(str(saved_model_versions(model)[-1])).signatures["serving_default"]
    return [t.decode() for t in serve(text=tf.constant(texts))["translation"].numpy()]


def _stage(number, text):
    print(f"\n[{number}/5] {text}", flush=True)


def main(argv=None):
    """`python -m kzoo.demo [--output RUN] [--minutes M] [--train-pairs N] [--val-pairs N] [--steps-per-epoch N]`:
    the five stages above.

    Example:
    ```python
    import subprocess, sys
    usage = subprocess.run([sys.executable, "-m", "kzoo.demo", "--help"], capture_output=True, text=True).stdout
    usage.splitlines()[0]  # "usage: python -m kzoo.demo [-h] [--output OUTPUT] [--minutes MINUTES]"
    ```
    """
    parser = argparse.ArgumentParser(prog="python -m kzoo.demo", description=__doc__,
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--output", default="runs/demo", help="the run folder; its SavedModel goes inside it")
    parser.add_argument("--minutes", type=float, default=7.5, help="training time budget")
    parser.add_argument("--train-pairs", type=int, default=0,
                        help="train on the first this many Multi30k pairs (0: all 29,000; a few hundred: a smoke run)")
    parser.add_argument("--val-pairs", type=int, default=0,
                        help="validate and score on the first this many Multi30k val pairs (0: all 1,014)")
    parser.add_argument("--steps-per-epoch", type=int, default=100,
                        help="steps between the time-budget checks (training stops at the first epoch end past it)")
    args = parser.parse_args(argv)
    from kzoo.console import quiet_tensorflow

    quiet_tensorflow()
    if args.minutes <= 0 or args.train_pairs < 0 or args.val_pairs < 0 or args.steps_per_epoch < 1:
        parser.error(f"--minutes {args.minutes:g} must be positive, --train-pairs {args.train_pairs} and --val-pairs "
                     f"{args.val_pairs} at least 0, and --steps-per-epoch {args.steps_per_epoch} at least 1.")

    from kzoo.data import multi30k
    from kzoo.export import export_translator
    from kzoo.train.translation_recipe import TranslationConfig, train
    from kzoo.translator import Translator

    started = time.monotonic()
    output = pathlib.Path(args.output)

    _stage(1, "Reading Multi30k En-De, shipped with kzoo (data/multi30k, see its SOURCE.md)")
    train_pairs, val_pairs = multi30k("train"), multi30k("val")
    if args.train_pairs:
        train_pairs = (train_pairs[0][: args.train_pairs], train_pairs[1][: args.train_pairs])
    if args.val_pairs:
        val_pairs = (val_pairs[0][: args.val_pairs], val_pairs[1][: args.val_pairs])
    print(f"    {len(train_pairs[0])} training pairs, {len(val_pairs[0])} validation pairs")

    _stage(2, f"Training a small Transformer for about {args.minutes:g} minutes, then scoring validation BLEU")
    # Short "epochs" (100 steps by default), so the time budget stops training close to it. No checkpoint averaging:
    # this early in training each checkpoint is much better than the one before.
    config = TranslationConfig(warmup_steps=400, minutes=args.minutes, steps_per_epoch=args.steps_per_epoch,
                               epochs=1000, average_last=1, patience=1000)
    model, tokenizer, scores = train(config, output, train_pairs, val_pairs, test_pairs=(), verbose=2,
                                     methods=("greedy",))
    print(f"    trained {scores['epochs']} × {config.steps_per_epoch} steps in {scores['train_minutes']} min; "
          f"validation BLEU {scores['val_greedy']['bleu']} "
          f"(greedy, sacrebleu {scores['val_greedy']['bleu_signature']})")

    _stage(3, "Translating a handful of sentences with beam search (beam 4)")
    translator = Translator(model, tokenizer, method="beam", beam_size=4)
    shipped = _shipped_translations(EXAMPLES)
    for source, translation, reference in zip(EXAMPLES, translator(EXAMPLES), shipped):
        print(f"    EN: {source}\n    DE: {translation}")
        if reference is not None:
            print(f"    DE, the shipped model ({SHIPPED_NOTE}): {reference}")

    _stage(4, "Exporting a SavedModel: text in, translation out, tokenizer and beam search inside the graph")
    path = export_translator(translator, output / "saved_model")
    print(f"    wrote {path}")

    _stage(5, "Reloading it in a fresh Python process that imports only TensorFlow and tensorflow-text")
    result = subprocess.run([sys.executable, "-c", RELOAD, path, json.dumps(EXAMPLES)], capture_output=True,
                            text=True, check=True)
    served = json.loads(result.stdout.strip().splitlines()[-1])
    for source, translation in zip(EXAMPLES, served["translations"]):
        print(f"    EN: {source}\n    DE: {translation}")
    same = served["translations"] == translator(EXAMPLES)
    print(f"    kzoo imported there: {served['kzoo_imported']}; same translations as in this process: {same}")
    print(f"\nDone in {(time.monotonic() - started) / 60:.1f} minutes. Run folder: {output}")
    if not same or served["kzoo_imported"]:
        sys.exit("The reloaded SavedModel did not reproduce the in-process translations.")


if __name__ == "__main__":
    main()
