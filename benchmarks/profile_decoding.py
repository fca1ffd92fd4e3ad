"""Where the exported translator's time goes: one request of Multi30k val sentences through a SavedModel's
`serving_default`, traced op by op (TensorFlow's step stats, FULL_TRACE), grouped by op type.

The SavedModel is loaded in a TF1-style session with 2 intra-op and 2 inter-op threads, as a server on this machine
would run it. One untraced run is timed first (wall and CPU seconds); then one traced run gives every op execution
inside the decoding loop, summed by op type, with its share of all op time and how often it ran per beam step
(beam search calls TopKV2 three times a step). Tracing slows the ops it records, so read the shares, not the sums.

Usage:
    .venv/bin/python benchmarks/profile_decoding.py saved_models/transformer_multi30k_en_de/2 --sentences 64
    .venv/bin/python benchmarks/profile_decoding.py PATH --no-trace   # only the untraced run (for timing a process)
"""

import argparse
import collections
import os
import time

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tf-text ops the graph uses)

from kzoo.data import multi30k

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("saved_model", help="a SavedModel version folder of kzoo's translator")
    parser.add_argument("--sentences", type=int, default=64, help="the first N val sentences, as one request")
    parser.add_argument("--no-trace", action="store_true", help="time the untraced run only")
    args = parser.parse_args()
    texts = multi30k("val")[0][: args.sentences]
    tf.compat.v1.disable_eager_execution()
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
