"""Where the exported translator's time goes: one request of Multi30k val sentences through a SavedModel's
`serving_default`, traced op by op (TensorFlow's step stats, FULL_TRACE), grouped by op type.

The SavedModel is loaded in a TF1-style session with 2 intra-op and 2 inter-op threads, as a server on this machine
would run it. One untraced run is timed first (wall and CPU seconds); then one traced run gives every op execution
inside the decoding loop, summed by op type, with its share of all op time and how often it ran per beam step
(beam search calls TopKV2 three times a step). Tracing slows the ops it records, so read the shares, not the sums.

With `--versus OTHER`, no trace: the two SavedModels translate a whole split side by side instead, sorted by length
in batches of `--batch`, taking turns on every batch (the first to go alternating), for `--rounds` rounds: each
one's sentences/s per round and their median, the median ratio, CPU time over wall time, BLEU, how many strings
equal the other's, and how many cores other processes kept busy meanwhile (/proc/stat).

Usage:
    .venv/bin/python benchmarks/profile_decoding.py saved_models/transformer_multi30k_en_de/4 --sentences 64
    .venv/bin/python benchmarks/profile_decoding.py PATH --no-trace   # only the untraced run (for timing a process)
    .venv/bin/python benchmarks/profile_decoding.py NEW --versus saved_models/transformer_multi30k_en_de/3 \
        --split test_2016_flickr --rounds 3
"""

import argparse
import collections
import os
import statistics
import time

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tf-text ops the graph uses)
from timing import OtherLoad

from kzoo.data import multi30k
from kzoo.train.quality import translation_scores

TOP_K_PER_STEP = 3  # beam_search's top_k calls per step: candidates, alive hypotheses, finished hypotheses


def op_table(run_metadata, rows=12):
    """Markdown rows: op type, share of op time, executions per beam step; and the number of steps."""
    time_by_op, count_by_op = collections.Counter(), collections.Counter()
    for device in run_metadata.step_stats.dev_stats:
        for node in device.node_stats:
            label = node.timeline_label
            op = label.split(" = ")[1].split("(")[0] if " = " in label else node.node_name
            time_by_op[op] += node.all_end_rel_micros
            count_by_op[op] += 1
    steps = max(1, count_by_op["TopKV2"] // TOP_K_PER_STEP)
    total = sum(time_by_op.values())
    lines = ["| op type | share of op time | executions per step |", "| --- | --- | --- |"]
    for op, micros in time_by_op.most_common(rows):
        lines.append(f"| {op} | {100 * micros / total:.1f}% | {count_by_op[op] / steps:.1f} |")
    lines.append(f"| (all {len(time_by_op)} op types) | 100% | {sum(count_by_op.values()) / steps:.0f} |")
    return lines, steps


def session_translator(path):
    """A TF1 session over the SavedModel at `path` (2 intra-op, 2 inter-op threads) as a function: texts to strings."""
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=2)
    session = tf.compat.v1.Session(graph=tf.Graph(), config=config)
    with session.graph.as_default():
        signature = tf.compat.v1.saved_model.loader.load(session, ["serve"], path).signature_def["serving_default"]
    text, translation = signature.inputs["text"].name, signature.outputs["translation"].name
    return lambda texts: [t.decode("utf-8") for t in session.run(translation, {text: texts})]


def side_by_side(paths, split, batch, rounds):
    """Both SavedModels over all of `split` in turns, batch by batch; prints a markdown table and the load."""
    english, german = multi30k(split)
    order = sorted(range(len(english)), key=lambda i: len(english[i]))
    batches = [order[start : start + batch] for start in range(0, len(order), batch)]
    translators = [session_translator(path) for path in paths]
    for translate in translators:
        translate(english[:2])  # warm-up
    rates, cpu_shares = [[] for _ in paths], [[] for _ in paths]
    outputs = [[None] * len(english) for _ in paths]
    load, other = os.getloadavg()[0], OtherLoad()
    for round_ in range(rounds):
        wall, cpu = [0.0] * len(paths), [0.0] * len(paths)
        for number, rows in enumerate(batches):
            turn = range(len(paths)) if (round_ + number) % 2 == 0 else reversed(range(len(paths)))
            for k in turn:
                start, start_cpu = time.monotonic(), time.process_time()
                for i, string in zip(rows, translators[k]([english[i] for i in rows])):
                    outputs[k][i] = string
                wall[k] += time.monotonic() - start
                cpu[k] += time.process_time() - start_cpu
        for k in range(len(paths)):
            rates[k].append(len(english) / wall[k])
            cpu_shares[k].append(cpu[k] / wall[k])
    same = sum(a == b for a, b in zip(*outputs))
    print(f"{split}, {len(english)} sentences in batches of {batch}, {rounds} rounds; load average before "
          f"{load:.1f}, after {os.getloadavg()[0]:.1f}; other processes kept {other.cores():.2f} cores busy")
    print("| SavedModel | sentences/s (median) | per round | CPU / wall | BLEU | strings equal to the other's |")
    print("| --- | --- | --- | --- | --- | --- |")
    for k, path in enumerate(paths):
        per_round = ", ".join(f"{rate:.1f}" for rate in rates[k])
        bleu = translation_scores(outputs[k], german)["bleu"]
        print(f"| {path} | {statistics.median(rates[k]):.1f} | {per_round} | "
              f"{statistics.median(cpu_shares[k]):.2f} | {bleu:.2f} | {same}/{len(english)} |")
    ratio = statistics.median(a / b for a, b in zip(*rates))
    print(f"median ratio of sentences/s, {paths[0]} over {paths[1]}: {ratio:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("saved_model", help="a SavedModel version folder of kzoo's translator")
    parser.add_argument("--sentences", type=int, default=64, help="the first N val sentences, as one request")
    parser.add_argument("--no-trace", action="store_true", help="time the untraced run only")
    parser.add_argument("--versus", help="a second SavedModel: time both side by side over --split instead")
    parser.add_argument("--split", default="test_2016_flickr", help="with --versus: the Multi30k split")
    parser.add_argument("--batch", type=int, default=64, help="with --versus: sentences per request")
    parser.add_argument("--rounds", type=int, default=3, help="with --versus: passes over the split")
    args = parser.parse_args()
    tf.compat.v1.disable_eager_execution()
    if args.versus:
        side_by_side([args.saved_model, args.versus], args.split, args.batch, args.rounds)
        return
    texts = multi30k("val")[0][: args.sentences]
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=2)
    with tf.compat.v1.Session(config=config) as session:
        signature = tf.compat.v1.saved_model.loader.load(session, ["serve"], args.saved_model).signature_def
        text, translation = (signature["serving_default"].inputs["text"].name,
                             signature["serving_default"].outputs["translation"].name)
        session.run(translation, {text: texts[:2]})  # warm-up
        load = os.getloadavg()[0]
        wall, cpu = time.monotonic(), time.process_time()
        session.run(translation, {text: texts})
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        print(f"{args.saved_model}: {len(texts)} sentences in {wall:.2f} s wall, {cpu:.2f} s CPU "
              f"(load average before: {load:.1f})")
        if args.no_trace:
            return
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        metadata = tf.compat.v1.RunMetadata()
        session.run(translation, {text: texts}, options=options, run_metadata=metadata)
    lines, steps = op_table(metadata)
    print(f"{steps} beam steps in all (sub-batches included)")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
