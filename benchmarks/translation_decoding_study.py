"""The decoding rows of the translation study (issue 21): beam size and length penalty, scored on Multi30k val only.

The shipped translator's weights (or, with `--translator`, any folder `Translator.load` reads: a finished
translation-recipe run, a SavedModel version), loaded as a `kzoo.translator.Translator`, decode the 1,014 val
sentences with each (beam size, GNMT length penalty α, stopping rule) of the grid, in batches of 64; each row gives
cased sacreBLEU, chrF and the seconds it took. "early stopping" rows settle a sentence once beam-size hypotheses have
ended (CTranslate2's rule), the others when no alive hypothesis can beat the best finished one (exact). Only val is
scored: test_2016_flickr is reported once, for the chosen model (issue 21's rule), so this script never reads it. The
training rows of the study (model size, dropout, depth split, vocabulary, learning rate, ...) are runs of the
translation recipe itself, scored by benchmarks/translation_training_study.py.

Usage:
    .venv/bin/python benchmarks/translation_decoding_study.py --output benchmarks/RESULTS.md
    .venv/bin/python benchmarks/translation_decoding_study.py --translator RUN --output benchmarks/RESULTS.md

Another translator's rows go to a section of their own, named after its folder (a SavedModel version's as
MODEL-VERSION), so the shipped weights' rows stay.
"""

import argparse
import os
import pathlib

from results_file import environment_line, machine_load, replace_section

from kzoo.data import multi30k, shipped_model
from kzoo.serving.model_config import saved_model_versions
from kzoo.train.translation_recipe import score
from kzoo.translator import Translator

SECTION = "translation-study-decoding"
GRID = [(1, 0.0, False), (4, 0.6, False), (4, 0.8, False), (4, 1.0, False), (5, 0.6, False), (5, 0.8, False),
        (5, 1.0, False), (5, 1.2, False), (6, 0.6, False), (6, 1.0, False),
        (4, 0.6, True), (4, 0.8, True), (4, 1.0, True), (5, 1.0, True), (5, 1.2, True)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", help="RESULTS.md to write the section into")
    parser.add_argument("--sentences", type=int, help="only the first N val sentences (a smoke run)")
    parser.add_argument("--translator", type=pathlib.Path,
                        help="a run folder or SavedModel version to study instead of the shipped translator")
    args = parser.parse_args()
    model = args.translator or shipped_model("transformer_multi30k_en_de")
    loaded = Translator.load(model)  # once: each setting of the grid decodes with these weights
    own = f"beam {loaded.beam_size}, α {loaded.length_penalty} as its setting"
    if args.translator:
        folder = args.translator.resolve()
        name = f"{folder.parent.name}-{folder.name}" if folder.name.isdigit() else folder.name  # a version: model-N
        section, described = f"{SECTION}-{name}", f"The weights of {name} ({own})"
    else:
        section = SECTION
        described = f"The shipped weights (transformer_multi30k_en_de/{saved_model_versions(model)[-1].name}, {own})"
    english, german = (side[: args.sentences] for side in multi30k("val"))
    before = os.getloadavg()
    rows = []
    for beam_size, alpha, early_stopping in GRID:
        method = "greedy" if beam_size == 1 else "beam"
        translator = Translator(loaded.model, loaded.tokenizer, **{
            **loaded.settings(), "method": method, "beam_size": beam_size, "length_penalty": alpha,
            "early_stopping": early_stopping})
        scores, _ = score(translator, english, german)
        label = "greedy" if method == "greedy" else f"beam {beam_size}, α {alpha}" + (
            ", early stopping" if early_stopping else "")
        rows.append(f"| {label} | {scores['bleu']:.2f} | {scores['chrf']:.2f} | {scores['seconds']} |")
        print(rows[-1], flush=True)
    after = os.getloadavg()
    text = "\n".join([
        "## Translation study: decoding settings on val (issue 21)",
        "",
        environment_line(),
        "",
        f"{described}, as a Python `Translator`, Multi30k val ({len(english)} sentences), batches of 64; "
        "sacreBLEU cased (13a) and chrF. Validation only: the test set is not read.",
        "",
        "| decoding | val BLEU | val chrF | seconds |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
        machine_load(before, after) + ".",
    ])
    print(text)
    if args.output:
        replace_section(args.output, section, text)


if __name__ == "__main__":
    main()
