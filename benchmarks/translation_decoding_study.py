"""The decoding rows of the translation study (issue 21): beam size and length penalty, scored on Multi30k val only.

The shipped translator's weights, loaded as a `kzoo.translator.Translator`, decode the 1,014 val sentences with each
(beam size, GNMT length penalty α) of the grid, in batches of 64; each row gives cased sacreBLEU and chrF. Only val
is scored: test_2016_flickr is reported once, for the chosen model (issue 21's rule), so this script never reads it.
The training rows of the study (model size, dropout, depth split, vocabulary, learning rate, ...) need a quiet
2-core machine for their fixed training budgets and are run with the translation recipe itself (docs/open_work.md).

Usage:
    .venv/bin/python benchmarks/translation_decoding_study.py --output benchmarks/RESULTS.md
"""

import argparse
import os

from results_file import environment_line, machine_load, replace_section

from kzoo.data import multi30k, shipped_model
from kzoo.serving.model_config import saved_model_versions
from kzoo.train.translation_recipe import score
from kzoo.translator import Translator

SECTION = "translation-study-decoding"
GRID = [(1, 0.0), (4, 0.6), (4, 0.8), (4, 1.0), (5, 0.6), (5, 0.8), (5, 1.0), (6, 0.6), (6, 1.0)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", help="RESULTS.md to write the section into")
    parser.add_argument("--sentences", type=int, help="only the first N val sentences (a smoke run)")
    args = parser.parse_args()
    model = shipped_model("transformer_multi30k_en_de")
    version = saved_model_versions(model)[-1].name
    english, german = (side[: args.sentences] for side in multi30k("val"))
    before = os.getloadavg()
    rows = []
    for beam_size, alpha in GRID:
        method = "greedy" if beam_size == 1 else "beam"
        translator = Translator.load(model, method=method, beam_size=max(beam_size, 1), length_penalty=alpha)
        scores, _ = score(translator, english, german)
        label = "greedy" if method == "greedy" else f"beam {beam_size}, α {alpha}"
        rows.append(f"| {label} | {scores['bleu']:.2f} | {scores['chrf']:.2f} | {scores['seconds']} |")
        print(rows[-1], flush=True)
    after = os.getloadavg()
    text = "\n".join([
        "## Translation study: decoding settings on val (issue 21)",
        "",
        environment_line(),
        "",
        f"The shipped weights (transformer_multi30k_en_de/{version}, trained with beam 4, α 0.6 as its setting) as a "
        f"Python `Translator`, Multi30k val ({len(english)} sentences), batches of 64; sacreBLEU cased (13a) and chrF. "
        "Validation only: the test set is not read.",
        "",
        "| decoding | val BLEU | val chrF | seconds |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
        machine_load(before, after) + ".",
    ])
    print(text)
    if args.output:
        replace_section(args.output, SECTION, text)


if __name__ == "__main__":
    main()
