"""Export a training run, or a public BERT checkpoint, as a raw-text SavedModel version.

    python -m kzoo.export --run runs/multi30k --output saved_models/transformer_multi30k_en_de   # translator
    python -m kzoo.export --run runs/multi30k --output saved_models/NAME --quantize bfloat16     # quantized
    python -m kzoo.export --run runs/multi30k --output saved_models/NAME --jit-max-sentences 8   # XLA, small batches
    python -m kzoo.export --run runs/multi30k --output saved_models/NAME --beam-size 4           # another beam
    python -m kzoo.export --run runs/multi30k --output saved_models/NAME --early-stopping        # CT2's stop rule
    python -m kzoo.export --run runs/minilm_sst2 --output saved_models/minilm_sst2              # classifier
    python -m kzoo.export --checkpoint path/to/all-MiniLM-L6-v2 --output saved_models/minilm_embedder

A run folder of `kzoo.train.translation_recipe` (model.keras, tokenizer.model) becomes a translator, one of
`kzoo.train.bert_finetuning_recipe` (classifier.keras, config.json) a text classifier that tokenizes as the run did,
whether it fine-tuned a public checkpoint or a backbone of kzoo's own pretraining; `--checkpoint` alone makes a
sentence embedder. The version is written inside --output. `--quantize int8|bfloat16` (translators) stores the
weight matrices quantized and `--compute-dtype` picks the dtype the decoder's matmuls run in (see
`kzoo.export.export_translator`). `--jit-max-sentences N` (translators) decodes beam-search sub-batches of at most N
sentences compiled by XLA (TF Serving then needs `--xla_cpu_compilation_enabled=true`). `--beam-size`,
`--length-penalty` and `--early-stopping` / `--no-early-stopping` (translators) replace the beam settings the run
recorded, e.g. a narrower beam for throughput, or CTranslate2's stopping rule.
"""

import argparse
import json
import pathlib

from kzoo.console import quiet_tensorflow

POOLINGS = ("mean", "cls", "pooled")  # kzoo.models.bert_sentence_embedder.POOLINGS
QUANTIZATIONS = ("int8", "bfloat16")  # kzoo.export.quantization.QUANTIZATIONS
COMPUTE_DTYPES = ("float32", "bfloat16")  # kzoo.export.quantization.COMPUTE_DTYPES


def export_translation_run(run, output, version=None, quantization=None, compute_dtype=None, jit_max_sentences=0,
                           lanes=1, beam_size=None, length_penalty=None, early_stopping=None):
    from kzoo.export.translator_export import export_translator
    from kzoo.translator import Translator

    # The run's model (no optimizer state) and tokenizer, with the beam settings its config.json records unless
    # `beam_size`, `length_penalty` or `early_stopping` replace them.
    decoding = {name: value for name, value in (("beam_size", beam_size), ("length_penalty", length_penalty),
                                                ("early_stopping", early_stopping)) if value is not None}
    translator = Translator.load(run, method="beam", jit_max_sentences=jit_max_sentences, lanes=lanes, **decoding)
    return export_translator(translator, output, version, quantization=quantization, compute_dtype=compute_dtype)


def export_classification_run(run, output, version=None, checkpoint=None):
    """A fine-tuning run's classifier as a text classifier, tokenizing as the run did: with the preprocessor its
    classifier.keras holds (every run since kzoo's one text pipeline: a public checkpoint's tokenizer or a kzoo
    backbone's own vocabulary alike), or, for older runs, the tokenizer of `checkpoint` (or of the checkpoint the run
    recorded) at the run's recorded sequence length."""
    import keras

    from kzoo.data.glue import GLUE_TASKS
    from kzoo.export.classifier_export import export_classifier
    from kzoo.models.bert_pretrained import check_fits
    from kzoo.text.bert_preprocessor import BertPreprocessor

    config = json.loads((run / "config.json").read_text())
    classifier = keras.saving.load_model(run / "classifier.keras", compile=False)  # no optimizer state in the export
    preprocessor = getattr(classifier, "preprocessor", None)
    if preprocessor is None or checkpoint:
        checkpoint = checkpoint or config.get("checkpoint")
        sequence_length = config.get("sequence_length")
        if not checkpoint or not sequence_length:
            raise ValueError(
                f"{run / 'classifier.keras'} holds no preprocessor (a run made before kzoo kept it there) and "
                f"{run / 'config.json'} records {'no checkpoint' if not checkpoint else 'no sequence_length'}: "
                "fine-tune again, pass --checkpoint with the checkpoint whose tokenizer the run used, or export it "
                "from Python with kzoo.export.export_classifier and the preprocessor the run used."
            )
        preprocessor = BertPreprocessor.from_checkpoint(checkpoint, sequence_length=sequence_length)
    check_fits(classifier.backbone, preprocessor)
    task = GLUE_TASKS[config["task"]]
    label_names = getattr(classifier, "label_names", None) or task.label_names
    return export_classifier(classifier, preprocessor, label_names, output, version,
                             pair=task.second_text is not None)


def export_checkpoint_embedder(checkpoint, output, version=None, pooling="mean", sequence_length=128):
    """A public checkpoint as a sentence embedder. A `sequence_length` beyond the checkpoint's positions is refused
    before its weights are read."""
    from kzoo.export.embedder_export import export_embedder
    from kzoo.models.bert_pretrained import pretrained_bert

    backbone, preprocessor = pretrained_bert(checkpoint, sequence_length)
    return export_embedder(backbone, preprocessor, output, version, pooling=pooling)


def main(argv=None):
    quiet_tensorflow()
    parser = argparse.ArgumentParser(prog="python -m kzoo.export", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--run", help="a training run folder (translation or fine-tuning recipe)")
    parser.add_argument("--checkpoint", help="a public BERT checkpoint: alone, exports a sentence embedder; with a "
                                             "fine-tuning --run, the tokenizer to use")
    parser.add_argument("--output", required=True, help="the model's folder; the version is written inside it")
    parser.add_argument("--version", type=int, help="defaults to one more than the highest existing version")
    parser.add_argument("--pooling", default="mean", choices=POOLINGS, help="embedder pooling")
    parser.add_argument("--sequence-length", type=int, default=128, help="embedder: longer texts are truncated")
    parser.add_argument("--quantize", choices=QUANTIZATIONS, help="translator: store the weight matrices as int8 "
                        "(per-channel scales, a quarter of the size) or bfloat16 (half); default float32")
    parser.add_argument("--compute-dtype", choices=COMPUTE_DTYPES, help="translator: the dtype its matmuls run in; "
                        "default bfloat16 with --quantize bfloat16, else float32")
    parser.add_argument("--beam-size", type=int, metavar="N",
                        help="translator: hypotheses the beam search keeps per sentence (default: the run's)")
    parser.add_argument("--length-penalty", type=float, metavar="ALPHA",
                        help="translator: the beam search's GNMT length penalty alpha, 0 or more (default: the run's)")
    parser.add_argument("--early-stopping", action=argparse.BooleanOptionalAction,
                        help="translator: beam search ends a sentence once beam-size hypotheses have ended "
                             "(CTranslate2's rule; not exact), or, with --no-early-stopping, when no alive "
                             "one can beat its best (default: the run's)")
    parser.add_argument("--jit-max-sentences", type=int, default=0, metavar="N",
                        help="translator: beam-search sub-batches of at most N sentences (a power of two, such as 8) "
                             "decode compiled by XLA, about twice as fast for a few sentences; the version gets "
                             "TF Serving warm-up requests, and TF Serving must run with "
                             "--xla_cpu_compilation_enabled=true; 0 compiles nothing")
    parser.add_argument("--lanes", type=int, default=1, metavar="N",
                        help="translator: decode a request's sentences in N independent lanes at once (the number "
                             "of cores the server gives one request; serve with one intra-op thread, TF Serving's "
                             "--tensorflow_intra_op_parallelism=1); same translations, 1 decodes one sub-batch "
                             "after another")
    args = parser.parse_args(argv)
    decoding_flags = (("lanes", args.lanes, 1), ("jit_max_sentences", args.jit_max_sentences, 0),
                      ("beam_size", args.beam_size, None), ("length_penalty", args.length_penalty, None))
    given = {name: value for name, value, default in decoding_flags if value != default}
    if given:  # the checks `Translator` makes, before any weights are read (TensorFlow loads only for them)
        from kzoo.translator import check_decoding

        try:
            check_decoding(spell=lambda name, value: f"--{name.replace('_', '-')} {value}", **given)
        except ValueError as error:
            parser.error(str(error))
    translator_only = [flag for flag, value in (("--quantize", args.quantize), ("--compute-dtype", args.compute_dtype),
                                                ("--beam-size", args.beam_size is not None),
                                                ("--length-penalty", args.length_penalty is not None),
                                                ("--early-stopping", args.early_stopping is not None),
                                                ("--jit-max-sentences", args.jit_max_sentences),
                                                ("--lanes", args.lanes != 1)) if value]
    if args.run:
        from kzoo.train.run import finished_run

        run = pathlib.Path(args.run)
        finished_run(run)  # an unfinished or failed run's files are not whole
        if (run / "model.keras").is_file() and (run / "tokenizer.model").is_file():
            path = export_translation_run(run, args.output, args.version, args.quantize, args.compute_dtype,
                                          args.jit_max_sentences, args.lanes, args.beam_size, args.length_penalty,
                                          args.early_stopping)
        elif translator_only:
            parser.error(f"{' and '.join(translator_only)} apply to translation runs only; {run} is not one")
        elif (run / "classifier.keras").is_file():
            path = export_classification_run(run, args.output, args.version, args.checkpoint)
        else:
            parser.error(f"{run} has neither model.keras + tokenizer.model (a translation run) nor classifier.keras "
                         "(a fine-tuning run)")
    elif translator_only:
        parser.error(f"{' and '.join(translator_only)} apply to translation runs (--run) only")
    elif args.checkpoint:
        path = export_checkpoint_embedder(args.checkpoint, args.output, args.version, args.pooling,
                                          args.sequence_length)
    else:
        parser.error("pass --run (a training run) or --checkpoint (a BERT checkpoint, exported as an embedder)")
    print(path)


if __name__ == "__main__":
    main()
