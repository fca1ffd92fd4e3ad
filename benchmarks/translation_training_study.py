"""The training rows of the translation study (issue 21): translation-recipe runs scored on Multi30k val only, each at
a fixed shorter training budget and at its whole budget.

Each RUN is a finished or unfinished folder of `python -m kzoo.train.translation_recipe` (its epoch checkpoints are
kept). For every budget in `--budgets` (minutes of training, measured from the run's tokenizer file, written just
before training starts, to each checkpoint's file time), the epochs that ended inside it are averaged (the last
`--average` of them, as the recipe does) and the averaged model decodes the 1,014 val sentences with the run's own
beam settings; each row gives cased sacreBLEU (lowercased beside it) and chrF. A budget longer than the run's own
(its `minutes` setting) gets a row that says so, not the run's own epochs again. Only val is scored: test_2016_flickr
is reported once, for the chosen model, by the recipe itself (issue 21's rule), so this script never reads it.

The run folders are not committed (runs/ is ignored), so the file times must be those the training wrote: run this on
the machine that trained them. A row's budget is wall time on that machine, so the runs must be made on a quiet one.
A run made beside other work is scored at budgets in epochs instead (`--epoch-budgets`): every configuration of the
same data and tokens per batch takes the same steps an epoch, so a quiet run's minutes per epoch convert them.

With `--output`, the section keeps the rows of earlier scorings that this one does not score again (runs whose
folders are gone) and, above its own header line, their header lines (date, command, CPU), so the table says how
each of its rows was made; the rows are printed as they are scored and the section is written, not printed.

Usage:
    .venv/bin/python benchmarks/translation_training_study.py runs/study/* --budgets 30 60 \
        --output benchmarks/RESULTS.md
"""

import argparse
import dataclasses
import json
import os
import pathlib

from results_file import environment_line, machine_load, read_section, replace_section

from kzoo.data import multi30k
from kzoo.train.callbacks import average_weights
from kzoo.train.translation_recipe import TranslationConfig, build_model, score, translator

SECTION = "translation-study-training"


def changes(config):
    """The fields of `config` that differ from the recipe's defaults, as `name=value, ...` (or "defaults")."""
    defaults = TranslationConfig()
    changed = [f"{field.name}={getattr(config, field.name)}" for field in dataclasses.fields(config)
               if getattr(config, field.name) != getattr(defaults, field.name)]
    return ", ".join(changed) or "defaults"


def epoch_minutes(run, kind="epoch"):
    """[(checkpoint path, minutes of training when it was written)] of a run folder, oldest first: the weights at each
    epoch's end (`kind="epoch"`) or the moving average of them that kzoo.train.MovingAverage saved
    (`kind="moving_average"`)."""
    start = (run / "tokenizer.model").stat().st_mtime
    checkpoints = sorted((run / "checkpoints").glob(f"{kind}_[0-9]*.weights.h5"))
    return [(path, (path.stat().st_mtime - start) / 60) for path in checkpoints]


def study_rows(run, budgets, average, sentences=None, epoch_budgets=(), moving_average=False):
    """One table row per budget (minutes, then epochs) for the run folder `run`: the last `average` epoch checkpoints
    inside the budget averaged, or with `moving_average=True` the last `average` moving averages of the weights saved
    at the ends of the epochs inside it (a run trained with `ema_momentum`), averaged."""
    from kzoo.text import SubwordTokenizer

    config = TranslationConfig(**json.loads((run / "config.json").read_text()))
    tokenizer = SubwordTokenizer.load(run / "tokenizer.model")
    model = build_model(config, tokenizer.vocabulary_size)
    english, german = (side[:sentences] for side in multi30k("val"))
    epochs = epoch_minutes(run, "moving_average" if moving_average else "epoch")
    if moving_average and not epochs:
        raise SystemExit(f"{run} holds no moving averages of its weights (checkpoints/moving_average_*.weights.h5): "
                         "it was not trained with --ema-momentum; score it without --moving-average.")
    rows = []
    cuts = [(f"{budget:g}", [e for e in epochs if e[1] <= budget]) for budget in budgets]
    # A run trained for `config.minutes` says nothing of a longer budget (its epochs would repeat its own row).
    beyond = {f"{budget:g}" for budget in budgets if budget > config.minutes}
    cuts += [(f"{count} epochs", epochs[:count] if len(epochs) >= count else []) for count in epoch_budgets]
    for label, inside in cuts:
        if label in beyond:
            rows.append(f"| {run.name} | {changes(config)} | {label} | beyond the run's own {config.minutes:g}-minute "
                        "budget | | | |")
            continue
        if not inside:
            rows.append(f"| {run.name} | {changes(config)} | {label} | no such epoch in the run | | | |")
            continue
        chosen = inside[-average:]
        average_weights(model, [str(path) for path, _ in chosen])
        scores, _ = score(translator(model, tokenizer, config), english, german)
        averaged = len(chosen)
        if moving_average:
            kind = "moving average" if len(chosen) == 1 else f"last {len(chosen)} moving averages"
            averaged = f"{kind} ({config.ema_momentum:g})"
        rows.append(f"| {run.name} | {changes(config)} | {label} | {len(inside)} ({inside[-1][1]:.1f} min) | "
                    f"{averaged} | {scores['bleu']:.2f} ({scores['bleu_lowercase']:.2f}) | {scores['chrf']:.2f} |")
        print(rows[-1], flush=True)
    return rows


def row_key(row):
    """A table row's run, budget and number of checkpoints averaged: what makes it a row of its own."""
    cells = [cell.strip() for cell in row.split("|")]
    return cells[1], cells[3], cells[5]


def earlier_rows(path, rows):
    """The table rows already in `path`'s section that `rows` do not score again (runs whose folders may be gone,
    other budgets or averages): a new scoring adds its rows to the study instead of erasing the earlier ones."""
    section = (read_section(path, SECTION) or "").splitlines()
    old = [line for line in section if line.startswith("| ") and not line.startswith(("| run |", "| ---"))]
    new = {row_key(row) for row in rows}
    return [row for row in old if row_key(row) not in new]


def earlier_scorings(path):
    """The header lines of `path`'s section (when and with what command each earlier scoring ran: one line each,
    between the title and the description), which a new scoring keeps above its own line while earlier rows stay."""
    section = (read_section(path, SECTION) or "").splitlines()
    header = []
    for line in section[1:]:
        if line.startswith("Runs of "):
            return header
        if line.strip():
            header.append(line)
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=pathlib.Path, help="translation-recipe run folders")
    parser.add_argument("--budgets", nargs="+", type=float, default=[30.0, 60.0],
                        help="training budgets in minutes, each scored on the epochs that ended inside it")
    parser.add_argument("--epoch-budgets", nargs="*", type=int, default=[],
                        help="budgets in epochs, for runs made beside other work (their minutes are not the budget)")
    parser.add_argument("--average", type=int,
                        help="the last N checkpoints inside a budget averaged (default: 5 epoch checkpoints, or 1 "
                             "moving average with --moving-average)")
    parser.add_argument("--moving-average", action="store_true",
                        help="score the moving average (kzoo.train.MovingAverage) of the weights saved at the end "
                             "of the last epoch inside each budget (runs trained with --ema-momentum), or the mean "
                             "of the last --average of them, instead of averaging epoch checkpoints")
    parser.add_argument("--output", help="RESULTS.md to write the section into")
    parser.add_argument("--sentences", type=int, help="only the first N val sentences (a smoke run)")
    args = parser.parse_args()
    for run in args.runs:
        if not (run / "config.json").is_file() or not (run / "tokenizer.model").is_file():
            parser.error(f"{run} is not a translation-recipe run folder (no config.json or tokenizer.model)")
    if args.average is None:
        args.average = 1 if args.moving_average else 5
    if args.average < 1:
        parser.error(f"--average {args.average}: average at least 1 checkpoint")
    before = os.getloadavg()
    rows = [row for run in args.runs
            for row in study_rows(run, args.budgets, args.average, args.sentences, args.epoch_budgets,
                                  args.moving_average)]
    after = os.getloadavg()
    kept = earlier_rows(args.output, rows) if args.output else []
    scorings = earlier_scorings(args.output) if kept else []
    text = "\n".join([
        "## Translation study: training settings on val (issue 21)",
        "",
        *[line for scoring in scorings for line in (scoring, "")],
        environment_line(),
        "",
        "Runs of `python -m kzoo.train.translation_recipe` on the 2-core machine, each scored at a fixed shorter "
        "budget and at its whole one: the epochs that ended inside the budget (minutes of training, from the run's "
        "file times), the last of them averaged (how many: the averaged column; \"moving average\": instead the "
        "moving average of the weights (kzoo.train.MovingAverage) at the last epoch's end, or the mean of the last "
        "few epochs' moving averages, for runs with ema_momentum), decoding Multi30k val"
        f"{f' (first {args.sentences} sentences)' if args.sentences else ''} with the run's beam settings; cased "
        "sacreBLEU (lowercased in brackets) and chrF. Validation only: the test set is not read."
        + (" Rows of runs scored earlier are kept as they were written (their dates are in their logs)."
           if kept else ""),
        "",
        "| run | changed from the defaults | budget (min) | epochs inside | averaged | val BLEU (lowercased) | "
        "val chrF |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *kept,
        *rows,
        "",
        machine_load(before, after) + " (while scoring; the training load is in each run's log).",
    ])
    if args.output:
        replace_section(args.output, SECTION, text)
        print(f"wrote section {SECTION} of {args.output}: {len(rows)} new rows, {len(kept)} earlier ones kept")
    else:
        print(text)


if __name__ == "__main__":
    main()
