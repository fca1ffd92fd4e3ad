"""Two exported translator versions compared on Multi30k val and test_2016_flickr, with a paired bootstrap.

Each version (a SavedModel folder, e.g. saved_models/transformer_multi30k_en_de/11) is loaded as TF Serving loads it
(`tf.saved_model.load`, its `serving_default`) and translates every sentence of each split in batches of 64, in the
split's order. Each row gives both versions' cased sacreBLEU (lowercased in brackets) and chrF, the difference B - A
in cased BLEU, and a paired bootstrap of that difference (Koehn 2004): the split's sentences resampled with
replacement, the same resample for both versions, BLEU recomputed from the resampled sentences' n-gram statistics
(as sacreBLEU's own paired bootstrap does), 1,000 times from a fixed seed; the 2.5th and 97.5th percentiles of the
differences and the share of resamples in which B is not ahead.

Issue 21's rule: a model is chosen on val only, and test_2016_flickr is read once, for the chosen model. This script
reads test for both versions: run it after the choice, to report how the chosen model stands against the one it
replaces, never to choose.

Usage:
    .venv/bin/python benchmarks/translation_versions_compared.py saved_models/transformer_multi30k_en_de/10 \
        saved_models/transformer_multi30k_en_de/11 --output benchmarks/RESULTS.md
"""

import argparse
import os
import pathlib

import numpy as np
from results_file import environment_line, machine_load, replace_section

SECTION = "translation-versions-compared"
SPLITS = ("val", "test_2016_flickr")


def served_translations(path, sources, batch_size=64):
    """`sources` translated by the SavedModel at `path` through its `serving_default`, in batches, in order."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SentencePiece ops of the graph)

    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    return [text.decode("utf-8") for start in range(0, len(sources), batch_size)
            for text in serve(text=tf.constant(sources[start : start + batch_size], tf.string))["translation"].numpy()]


def paired_bootstrap(hypotheses_a, hypotheses_b, references, resamples, rng):
    """(B - A in cased BLEU, (2.5th, 97.5th percentile of B - A over resamples), share of resamples with B <= A)."""
    import sacrebleu

    bleu = sacrebleu.metrics.BLEU()
    # Per-sentence n-gram statistics, summed over a resample: what sacreBLEU's own paired bootstrap resamples.
    stats = [np.array(bleu._extract_corpus_statistics(hypotheses, [references]), dtype=np.int64)
             for hypotheses in (hypotheses_a, hypotheses_b)]

    def score(sentence_stats):
        return bleu._compute_score_from_stats(list(sentence_stats.sum(axis=0))).score

    differences = []
    for _ in range(resamples):
        chosen = rng.integers(0, len(references), len(references))
        differences.append(score(stats[1][chosen]) - score(stats[0][chosen]))
    differences = np.array(differences)
    interval = (float(np.percentile(differences, 2.5)), float(np.percentile(differences, 97.5)))
    return score(stats[1]) - score(stats[0]), interval, float((differences <= 0).mean())


def comparison_rows(version_a, version_b, resamples=1000, sentences=None, seed=0):
    """One table row per split: both versions' scores and the paired bootstrap of B - A."""
    from kzoo.data import multi30k
    from kzoo.train.quality import translation_scores

    rng = np.random.default_rng(seed)
    rows = []
    for split in SPLITS:
        sources, references = (side[:sentences] for side in multi30k(split))
        a, b = (served_translations(version, sources) for version in (version_a, version_b))
        scores = [translation_scores(hypotheses, references) for hypotheses in (a, b)]
        difference, (low, high), not_ahead = paired_bootstrap(a, b, references, resamples, rng)
        rows.append(f"| {split} ({len(sources)}) | "
                    + " | ".join(f"{s['bleu']:.2f} ({s['bleu_lowercase']:.2f}), chrF {s['chrf']:.2f}" for s in scores)
                    + f" | {difference:+.2f} | {low:+.2f} to {high:+.2f} | {not_ahead:.3f} |")
        print(rows[-1], flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version_a", type=pathlib.Path, help="a SavedModel version folder (the one replaced)")
    parser.add_argument("version_b", type=pathlib.Path, help="a SavedModel version folder (the one chosen)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--sentences", type=int, help="only the first N sentences of each split (a smoke run)")
    parser.add_argument("--output", help="RESULTS.md to write the section into")
    args = parser.parse_args()
    for version in (args.version_a, args.version_b):
        if not (version / "saved_model.pb").is_file():
            parser.error(f"{version} is not a SavedModel version folder (no saved_model.pb): pass a numbered "
                         "version, e.g. saved_models/transformer_multi30k_en_de/11")
    if args.resamples < 1:
        parser.error(f"--resamples {args.resamples} must be at least 1")
    before = os.getloadavg()
    rows = comparison_rows(args.version_a, args.version_b, args.resamples, args.sentences)
    after = os.getloadavg()
    names = [f"{version.parent.name}/{version.name}" for version in (args.version_a, args.version_b)]
    text = "\n".join([
        "## Translation: two exported versions compared on val and test (issue 21)",
        "",
        environment_line(),
        "",
        f"A = {names[0]}, B = {names[1]}, each through its `serving_default` (its own beam settings), batches of 64. "
        "Cased sacreBLEU (lowercased in brackets) and chrF; B - A in cased BLEU with a paired bootstrap "
        f"({args.resamples} resamples of the sentences, seed 0): its 95% interval and the share of resamples in "
        "which B is not ahead. Run after the choice (made on val), never to make it.",
        "",
        "| split (sentences) | A | B | B - A | 95% interval | B <= A |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        machine_load(before, after) + ".",
    ])
    if args.output:
        replace_section(args.output, SECTION, text)
    else:
        print(text)


if __name__ == "__main__":
    main()
