"""What the speed benchmarks share: the matmul peak measured in the same run, contenders timed in turns, medians of
per-repeat values, the flags of a training benchmark, and how busy other processes kept the cores."""

import argparse
import os
import statistics
import time
from dataclasses import dataclass

import tensorflow as tf

PRECISIONS = ("float32", "mixed_bfloat16")
MATMUL_DTYPES = {"float32": "float32", "mixed_bfloat16": "bfloat16"}  # precision -> dtype of its matmuls
MATMUL_SIZE = 2048
MATMUL_RUNS = 5
MATMUL_FLOPS = 2 * MATMUL_SIZE**3


def median_ratio(seconds, baseline_seconds):
    """Median over repeats of the baseline's seconds over the contender's: how many times faster the contender ran."""
    return statistics.median(baseline / own for own, baseline in zip(seconds, baseline_seconds))


@dataclass
class Measurement:
    """What one precision's run measured, one entry per repeat: each model's seconds per step, and the matmul's.

    The ratio and MFU are medians of per-repeat values: each repeat's numbers were taken back to back, under the
    same machine load, so a repeat that another process slowed down counts once instead of skewing a whole column.
    """

    precision: str
    parameters: dict  # model name -> parameter count
    step_seconds: dict  # model name -> [seconds per step]
    matmul_seconds: list  # [median seconds of one matmul]

    def median_step_seconds(self, model):
        return statistics.median(self.step_seconds[model])

    @property
    def peak_flops(self):
        """Matmul FLOP/s: 2·n³ over the median matmul time."""
        return MATMUL_FLOPS / statistics.median(self.matmul_seconds)

    def mfu(self, model, flops_per_step):
        """Median over repeats of the model's FLOP/s over that repeat's matmul FLOP/s."""
        return statistics.median(
            flops_per_step / step * matmul / MATMUL_FLOPS
            for step, matmul in zip(self.step_seconds[model], self.matmul_seconds)
        )

    def ratio(self, model="kzoo", baseline="keras-hub"):
        """Median over repeats of `model`'s tokens/s over `baseline`'s."""
        return median_ratio(self.step_seconds[model], self.step_seconds[baseline])


TRAINING_TABLE = [
    "| precision | model | parameters | s/step | s/step per repeat | tokens/s | model GFLOP/s | peak GFLOP/s | MFU "
    "| {ratio} |",
    "|---|---|---|---|---|---|---|---|---|---|",
]  # the header of a training benchmark's results table; `ratio` names the last column


def training_rows(measurements, flops_per_step, tokens_per_step, ratio):
    """Markdown rows under TRAINING_TABLE: per precision and model, step time, tokens/s, model FLOP/s, MFU, and
    the text `ratio(measurement, model)` gives for the last column."""
    rows = []
    for m in measurements:
        for name in m.step_seconds:
            step = m.median_step_seconds(name)
            each = ", ".join(f"{seconds:.2f}" for seconds in m.step_seconds[name])
            rows.append(
                f"| {m.precision} | {name} | {m.parameters[name]:,} | {step:.3f} | {each} | "
                f"{tokens_per_step / step:,.0f} | {flops_per_step / step / 1e9:.1f} | "
                f"{MATMUL_DTYPES[m.precision]} {m.peak_flops / 1e9:.1f} | {100 * m.mfu(name, flops_per_step):.1f}% | "
                f"{ratio(m, name)} |"
            )
    return rows


def matmul_timer(dtype, size=MATMUL_SIZE):
    """A function that times one `tf.linalg.matmul` of two (size, size) `dtype` matrices in a `tf.function`."""
    a = tf.cast(tf.random.uniform((size, size), dtype=tf.float32, seed=1), dtype)
    b = tf.cast(tf.random.uniform((size, size), dtype=tf.float32, seed=2), dtype)

    @tf.function
    def matmul(a, b):
        return tf.linalg.matmul(a, b)[0, 0]  # one element back, so timing ends when the product is done

    def seconds():
        start = time.perf_counter()
        matmul(a, b).numpy()
        return time.perf_counter() - start

    seconds()  # trace and warm up
    return seconds


def seconds_per_step(model, batch, steps):
    """Mean seconds of `model.train_on_batch(*batch)`; `batch` is (x, y) or (x, y, sample_weight)."""
    start = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(*batch)  # returns the loss as a Python float: the step has finished
    return (time.perf_counter() - start) / steps


def time_training(precision, models, batches, tokens_per_step, steps, repeats, warmup_steps):
    """Warm up compiled `models` ({name: model}) on their `batches` ({name: batch}), then time matmuls and models in
    turns, and return the `Measurement`.

    Warm-up runs in turns too (the first step traces the training graph; a model's first step after another model
    was built is slow). Each repeat times MATMUL_RUNS matmuls (keeping their median), then `steps` steps of each
    model in turn, so the peak and every model see the same machine load.
    """
    for _ in range(warmup_steps):
        for name, model in models.items():
            seconds_per_step(model, batches[name], 1)
    matmul = matmul_timer(MATMUL_DTYPES[precision])
    result = Measurement(
        precision,
        parameters={name: model.count_params() for name, model in models.items()},
        step_seconds={name: [] for name in models},
        matmul_seconds=[],
    )
    for repeat in range(repeats):
        result.matmul_seconds.append(statistics.median(matmul() for _ in range(MATMUL_RUNS)))
        peak = MATMUL_FLOPS / result.matmul_seconds[-1]
        line = f"{precision:>14}  repeat {repeat + 1}/{repeats}:  matmul {peak / 1e9:.0f} GFLOP/s"
        for name, model in models.items():
            seconds = seconds_per_step(model, batches[name], steps)
            result.step_seconds[name].append(seconds)
            line += f"  {name} {seconds:.3f} s/step ({tokens_per_step / seconds:,.0f} tokens/s)"
        print(line, flush=True)
    return result


def timer(function, inputs, calls):
    """Mean seconds per call of `function(inputs)` over `calls` calls; `.numpy()` on every output waits for it."""

    def seconds():
        start = time.perf_counter()
        for _ in range(calls):
            tf.nest.map_structure(lambda tensor: tensor.numpy(), function(inputs))
        return (time.perf_counter() - start) / calls

    return seconds


def interleaved(timers, repeats):
    """{name: [seconds per call, one per repeat]}, the timers taking turns within each repeat, after a warm-up."""
    for seconds in timers.values():
        seconds()  # trace and warm up
        seconds()
    times = {name: [] for name in timers}
    for _ in range(repeats):
        for name, seconds in timers.items():
            times[name].append(seconds())
    return times


class OtherLoad:
    """How many cores other processes kept busy, on average, since this object was made (Linux /proc/stat).

    "Other" leaves out this process and its children that have ended and been waited for (a benchmark's worker
    processes, once closed), so read `cores()` after closing them: a worker still running counts as other load.
    """

    def __init__(self):
        self.start = self._now()

    @staticmethod
    def _now():
        user, nice, system, _idle, _iowait, irq, softirq = map(int, open("/proc/stat").readline().split()[1:8])
        own = os.times()
        busy = (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")
        return time.monotonic(), busy, own.user + own.system + own.children_user + own.children_system

    def cores(self):
        (wall0, busy0, own0), (wall1, busy1, own1) = self.start, self._now()
        return max(0.0, (busy1 - busy0) - (own1 - own0)) / (wall1 - wall0)


def header(title, env, other_cores):
    """The first lines of a training benchmark's section: title, command, date, CPU, other load, versions."""
    return [
        f"## {title}",
        "",
        f"Command: `{env['command']}`  ",
        f"Date: {env['date']}  ",
        f"CPU: {env['cpu']}  ",
        f"Other processes kept {other_cores:.2f} of the {os.cpu_count()} cores busy on average during the run "
        "(from /proc/stat, less this process's own CPU time).  ",
        f"Versions: {env['versions']}",
        "",
    ]


def parse_training_args(description, section, argv=None):
    """The flags of a training benchmark: steps, repeats, warm-up steps, precisions, output, quick."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2, help="timed training steps per repeat (default 2)")
    parser.add_argument("--repeats", type=int, default=10, help="timed repeats per model (default 10)")
    parser.add_argument(
        "--warmup-steps", type=int, default=3, help="untimed steps per model, the first compiles (default 3)"
    )
    parser.add_argument(
        "--precisions", default=",".join(PRECISIONS), help=f"comma-separated, from {','.join(PRECISIONS)} (default all)"
    )
    parser.add_argument("--output", help=f"write the markdown report into this file's `{section}` section")
    parser.add_argument("--quick", action="store_true", help="smoke check: 1 step, 2 repeats, 2 warm-up steps")
    args = parser.parse_args(argv)
    args.precisions = [precision.strip() for precision in args.precisions.split(",") if precision.strip()]
    unknown = [precision for precision in args.precisions if precision not in PRECISIONS]
    if unknown or not args.precisions:
        parser.error(f"--precisions={','.join(args.precisions)!r}: choose from {','.join(PRECISIONS)}.")
    if args.quick:
        args.steps, args.repeats, args.warmup_steps = 1, 2, 2
    for flag in ("steps", "repeats", "warmup_steps"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')}={getattr(args, flag)} must be at least 1.")
    return args
