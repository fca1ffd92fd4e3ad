"""Would a compiled (XLA) beam search make the exported translator faster? An experiment for issue 20.

XLA's CPU JIT needs fixed shapes, and kzoo's beam search is built on changing ones (the self-attention cache grows
a position a step; settled sentences leave the batch). So this script times it against the fixed-shape variant a
compiled step needs (`kzoo.decoding.fixed_shape_beam_search`, which began here): three decoders of the shipped
weights on Multi30k val token ids (tokenizing is left out: it is the same for all three and cannot be compiled,
tf-text ops have no XLA kernels):

- dynamic: `kzoo.decoding.beam_search` in a `tf.function`, as the exported translator runs it;
- fixed: `fixed_shape_beam_search` in a `tf.function`: a self-attention cache of `length` positions written in
  place, settled sentences kept in the batch but frozen;
- fixed, XLA: the same with `jit_compile=True` (compiled once per (batch, source length, output length) shape; the
  source is padded to a multiple of 8 and the output limit rounded up to one, so a few shapes cover a corpus).

Every decoder must give the dynamic one's token ids (the rows-equal column); then they take turns on the same
batches, sorted by length as `Translator.translate` sorts them. Val only: the test set is not read.

Usage:
    .venv/bin/python benchmarks/decoding_xla_study.py --output benchmarks/RESULTS.md
"""

import argparse
import os
import time

from results_file import environment_line, machine_load, replace_section

SECTION = "decoding-xla-study"
DYNAMIC = "dynamic (kzoo.decoding.beam_search)"  # the reference decoder's row


def round_up(n, multiple=8):
    return -(-n // multiple) * multiple


def decoders(translator):
    """{name: function(ids, limits, length) -> (ids, steps)} of the three decoders, for `translator`'s model."""
    import tensorflow as tf

    from kzoo.decoding import beam_search
    from kzoo.decoding.fixed_shape_beam_search import fixed_shape_beam_search

    model, beam, alpha = translator.model, translator.beam_size, translator.length_penalty
    dynamic = tf.function(lambda ids, limits: beam_search(model, ids, limits, beam, alpha, return_steps=True),
                          input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)])

    def fixed(jit):
        return tf.function(lambda ids, limits, length: fixed_shape_beam_search(model, ids, limits, length, beam,
                                                                               alpha), jit_compile=jit)

    return {DYNAMIC: lambda ids, limits, length: dynamic(ids, limits),
            "fixed shapes": fixed(False), "fixed shapes, XLA": fixed(True)}


def batches_of(translator, texts, batch_size, count):
    """`count` batches of `batch_size` val sentences spread over the length-sorted set: (ids padded to a multiple of
    8, per-sentence limits as the translator sets them, the largest limit rounded up to a multiple of 8)."""
    import numpy as np
    import tensorflow as tf

    texts = sorted(texts, key=len)
    stride = max(batch_size, len(texts) // count)
    chosen = []
    for start in range(0, len(texts), stride)[:count]:
        ids = translator.source_ids(tf.constant(texts[start:start + batch_size])).numpy()
        limits = translator.output_limits((ids != 0).sum(axis=1)).numpy()
        ids = np.pad(ids, [(0, 0), (0, round_up(ids.shape[1]) - ids.shape[1])])
        chosen.append((ids, limits, round_up(int(limits.max()))))
    return chosen


def measure(translator, texts, batch_size, count, rounds):
    """One table row per decoder for batches of `batch_size`."""
    import numpy as np

    batches = batches_of(translator, texts, batch_size, count)
    runs = decoders(translator)
    compile_seconds = {}
    for name, decode in runs.items():
        start = time.perf_counter()
        for batch in batches:
            decode(*batch)
        compile_seconds[name] = time.perf_counter() - start
    reference = [runs[DYNAMIC](*batch)[0].numpy() for batch in batches]
    equal = {name: sum(int((decode(*batch)[0].numpy()[:, : ref.shape[1]] == ref).all(axis=1).sum())
                       for batch, ref in zip(batches, reference)) for name, decode in runs.items()}
    seconds = {name: [] for name in runs}
    for _ in range(rounds):
        for name, decode in runs.items():
            start = time.perf_counter()
            for batch in batches:
                decode(*batch)[0].numpy()
            seconds[name].append(time.perf_counter() - start)
    sentences = sum(len(batch[0]) for batch in batches)
    base = float(np.median(seconds[DYNAMIC]))
    rows = []
    for name in runs:
        median = float(np.median(seconds[name]))
        rows.append(f"| {batch_size} | {name} | {sentences / median:.1f} | {1000 * median / sentences:.1f} | "
                    f"{base / median:.2f} | {equal[name]}/{sentences} | {compile_seconds[name]:.1f} |")
        print(rows[-1], flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[64, 1])
    parser.add_argument("--batches", nargs="+", type=int, default=[6, 20],
                        help="batches timed for each batch size, spread over the length-sorted val set")
    parser.add_argument("--rounds", type=int, default=3, help="turns each decoder takes over the batches")
    parser.add_argument("--output", help="RESULTS.md to write the section into")
    args = parser.parse_args()
    if len(args.batches) != len(args.batch_sizes):
        parser.error(f"--batches needs one count per batch size ({len(args.batch_sizes)}), got {args.batches}")
    import tensorflow_text  # noqa: F401  (the tokenizer's ops)

    from kzoo.data import multi30k, shipped_model
    from kzoo.serving.model_config import saved_model_versions
    from kzoo.translator import Translator

    version = saved_model_versions(shipped_model("transformer_multi30k_en_de"))[-1]
    translator = Translator.load(version)
    english, _ = multi30k("val")
    before = os.getloadavg()
    rows = [row for size, count in zip(args.batch_sizes, args.batches)
            for row in measure(translator, english, size, count, args.rounds)]
    after = os.getloadavg()
    text = "\n".join([
        "## Decoding: a compiled (XLA) fixed-shape beam search against kzoo's dynamic one (issue 20)",
        "",
        environment_line(),
        "",
        f"The shipped weights (transformer_multi30k_en_de/{version.name}, beam {translator.beam_size}, α "
        f"{translator.length_penalty}), token ids in and out (tokenizing is the same for all and left out), Multi30k "
        "val sentences sorted by length, in the script's turns; medians of the rounds. `fixed shapes`: a cache of "
        "the largest limit's positions written in place, settled sentences frozen in the batch; `XLA`: the same "
        "with `jit_compile=True`. The first pass over the batches (tracing, and XLA's compiles, one per shape) is "
        "its own column.",
        "",
        "| batch | decoder | sentences/s | ms a sentence | × dynamic | rows equal to dynamic | first pass (s) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        machine_load(before, after) + ".",
    ])
    print(text)
    if args.output:
        replace_section(args.output, SECTION, text)


if __name__ == "__main__":
    main()
