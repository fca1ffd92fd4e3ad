"""CTranslate2 on the shipped translator's weights with no TensorFlow decoding in the same process: the anchor as a
CTranslate2 user runs it, beside bench_translation_serving.py's interleaved table.

In bench_translation_serving.py the contenders take turns batch by batch in one process, and CTranslate2's OpenMP
threads lose time to TensorFlow's thread pools, which stay awake a moment after each of kzoo's batches (measured
2026-12-02: float32 103 sentences/s and 81 ms at batch 1 there, against about 147 and 24 ms alone). This script
times CTranslate2 alone, the same way (test_2016_flickr sorted by length in batches of 64, tokenized and
detokenized by kzoo's SubwordTokenizer, 2 intra-op threads, the shipped translator's beam size and matching length
penalty; then 60 single sentences), so the issue's ratios can be read against both.

Usage:
    .venv/bin/python benchmarks/ctranslate2_alone.py --output benchmarks/RESULTS.md
"""

import argparse
import os
import statistics
import tempfile
import time

import ctranslate2
from results_file import environment_line, machine_load, replace_section

from kzoo.data import multi30k, shipped_model
from kzoo.export import export_ctranslate2
from kzoo.export.ctranslate2_export import ctranslate2_beam_options, ctranslate2_ids
from kzoo.serving.model_config import saved_model_versions
from kzoo.translator import Translator

SECTION = "translation-serving-ctranslate2-alone"


def measure(translator, tokenizer, english, rounds, singles, **decoding):
    """(median sentences/s over `rounds` passes in batches of 64, per-round rates, p50 ms of `singles` sentences);
    `decoding`: beam_size and length_penalty for `ctranslate2_ids`."""
    order = sorted(range(len(english)), key=lambda i: len(english[i]))
    batches = [[english[i] for i in order[start:start + 64]] for start in range(0, len(order), 64)]
    ctranslate2_ids(translator, tokenizer, batches[0], **decoding)  # warm-up
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        for batch in batches:
            ctranslate2_ids(translator, tokenizer, batch, **decoding)
        rates.append(len(english) / (time.perf_counter() - start))
    latencies = []
    for sentence in english[:singles]:
        start = time.perf_counter()
        ctranslate2_ids(translator, tokenizer, [sentence], **decoding)
        latencies.append(1000 * (time.perf_counter() - start))
    return statistics.median(rates), rates, statistics.median(latencies)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", help="RESULTS.md to write the section into")
    parser.add_argument("--rounds", type=int, default=3, help="passes over test_2016_flickr (default 3)")
    parser.add_argument("--singles", type=int, default=60, help="batch-1 sentences (default 60)")
    parser.add_argument("--sentences", type=int, help="only the first N test_2016_flickr sentences (a smoke run)")
    args = parser.parse_args()
    model = shipped_model("transformer_multi30k_en_de")
    translator = Translator.load(model)
    version = saved_model_versions(model)[-1].name
    english = multi30k("test_2016_flickr")[0][: args.sentences]
    decoding = ctranslate2_beam_options(translator)
    before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for quantization in ("float32", "int8"):
            options = {"quantization": "int8"} if quantization == "int8" else {}
            exported = export_ctranslate2(translator.model, translator.tokenizer, f"{folder}/{quantization}", **options)
            runner = ctranslate2.Translator(str(exported), intra_threads=2)
            rate, rates, p50 = measure(runner, translator.tokenizer, english, args.rounds, args.singles, **decoding)
            rows.append(f"| CTranslate2 {quantization}, alone | {rate:.1f} | {', '.join(f'{r:.1f}' for r in rates)} | "
                        f"{p50:.1f} |")
            print(rows[-1], flush=True)
    after = os.getloadavg()
    text = "\n".join([
        "## Translation serving: CTranslate2 alone in its process",
        "",
        f"{environment_line()} · CTranslate2 {ctranslate2.__version__}",
        "",
        f"The shipped translator (transformer_multi30k_en_de/{version}) converted by `kzoo.export.export_ctranslate2`, "
        f"test_2016_flickr ({len(english)} sentences) sorted by length in batches of 64, {args.rounds} rounds, then "
        f"{args.singles} single sentences; 2 intra-op threads, beam {decoding['beam_size']} (length penalty "
        f"{decoding['length_penalty']}, "
        f"matching kzoo's {translator.length_penalty}), kzoo's tokenizer; nothing else decoding in the process "
        "(compare with the interleaved table above, where TensorFlow shares the process).",
        "",
        "| contender | sentences/s, batch 64 (median) | per round | latency p50, batch 1 (ms) |",
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
