"""Training throughput of kzoo's Transformer against keras-hub's, on one configuration, in one process.

Both models are the paper's base Transformer (6+6 post-LN blocks, d_model 512, 8 heads, d_ff 2048, relu,
dropout 0.1) with the same structure: separate source and target embeddings scaled by √d_model, sinusoidal
positions, embedding dropout, and the output projection tied to the target embedding. Each model trains with Adam
on one fixed in-memory batch through `train_on_batch` in graph mode (`jit_compile=False`). Per precision, the script
times a 2048³ matmul (the peak for MFU) and the two models in turns (matmul, kzoo, keras-hub, matmul, ...) so that
machine noise hits all of them alike, and reports medians.

Usage:
    .venv/bin/python benchmarks/bench_transformer.py --output benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_transformer.py --quick
"""

from dataclasses import asdict

import keras
import tensorflow as tf
from results_file import environment, replace_section
from timing import (
    MATMUL_RUNS,
    MATMUL_SIZE,
    TRAINING_TABLE,
    OtherLoad,
    header,
    parse_training_args,
    time_training,
    training_rows,
)
from transformer_models import BUILDERS, Config, training_flops_per_step


def compiled(model):
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=False,
    )
    return model


def random_batch(config):
    """One batch of token ids in [1, vocabulary_size): no padding, so every token counts."""
    generator = tf.random.Generator.from_seed(0)

    def ids(length):
        return generator.uniform((config.batch_size, length), 1, config.vocabulary_size, dtype=tf.int32)

    inputs = {"encoder_token_ids": ids(config.source_length), "decoder_token_ids": ids(config.target_length)}
    return inputs, ids(config.target_length)


# === Timing ===


def measure(config, precision, steps, repeats, warmup_steps):
    """Build and compile both models under `precision`, then warm them up and time them in turns with the matmul."""
    batch = random_batch(config)
    models = {}
    for name, build in BUILDERS.items():
        keras.utils.set_random_seed(0)
        models[name] = compiled(build(config, precision))
    batches = {name: batch for name in models}
    return time_training(precision, models, batches, config.tokens_per_step, steps, repeats, warmup_steps)


# === Report ===


def parameter_note(measurements):
    counts = {(m.precision, name): count for m in measurements for name, count in m.parameters.items()}
    if len(set(counts.values())) == 1:
        return f"Both models have the same number of parameters, {next(iter(counts.values())):,}."
    details = ", ".join(f"{name} ({precision}) {count:,}" for (precision, name), count in counts.items())
    return f"**Parameter counts differ**: {details}."


def report(config, measurements, args, env, other_cores):
    steps, repeats, warmup_steps = args.steps, args.repeats, args.warmup_steps
    flops = training_flops_per_step(config)
    lines = [
        *header("Training throughput: kzoo vs keras-hub", env, other_cores),
        "### Configuration",
        "",
        ", ".join(f"{key} {value}" for key, value in asdict(config).items()) + ".  ",
        "Post-LN blocks, relu, separate source and target embeddings scaled by √d_model, sinusoidal positions, "
        "embedding dropout, output projection tied to the target embedding; Adam, sparse cross-entropy from logits, "
        "`jit_compile=False`, one fixed in-memory batch through `train_on_batch`.  ",
        f"Tokens per step: {config.tokens_per_step:,} = batch {config.batch_size} × "
        f"({config.source_length} source + {config.target_length} target tokens).  ",
        parameter_note(measurements),
        "",
        "### Method",
        "",
        f"Per precision, both models are built, compiled and warmed up ({warmup_steps} steps each, in turns); then "
        f"each of {repeats} repeats times {MATMUL_RUNS} matmuls, then kzoo, then keras-hub, each model for {steps} "
        "training step(s), so the machine's load hits all three alike. s/step is the median over repeats (each "
        "repeat's mean is listed too); MFU and the ratio are medians of per-repeat values, so a repeat that another "
        "process slowed counts once.",
        "",
        f"Model FLOPs per training step: {flops / 1e9:.1f} GFLOP, counted analytically: the forward matmuls "
        "(attention projections, QKᵀ and AV, feed-forward, output projection; 2·m·k·n each) × 3 for forward and "
        "backward. Model GFLOP/s = that ÷ s/step. Peak = `tf.linalg.matmul` of two "
        f"{MATMUL_SIZE}×{MATMUL_SIZE} matrices in a `tf.function`, in the precision's compute dtype (bfloat16 for "
        "mixed_bfloat16), median over the precision's repeats. MFU = model GFLOP/s ÷ peak. "
        "Ratio = kzoo tokens/s ÷ keras-hub tokens/s.",
        "",
        "### Results",
        "",
        *(line.format(ratio="kzoo / keras-hub") for line in TRAINING_TABLE),
        *training_rows(measurements, flops, config.tokens_per_step, lambda m, name: f"{m.ratio():.3f}"),
        "",
        "Numbers on this shared 2-core machine move 4–8% from run to run, and up to 2× while another process takes "
        "a core: compare the two models within one run, not across runs.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    args = parse_training_args(__doc__, "training-throughput", argv)
    config = Config()
    other_load = OtherLoad()
    env = environment()
    print(f"{env['cpu']}; {env['versions']}")
    print(f"Model FLOPs per training step: {training_flops_per_step(config) / 1e9:.1f} GFLOP", flush=True)
    measurements = [
        measure(config, precision, args.steps, args.repeats, args.warmup_steps) for precision in args.precisions
    ]
    text = report(config, measurements, args, env, other_load.cores())
    print(text)
    if args.output:
        replace_section(args.output, "training-throughput", text)
        print(f"Wrote the training-throughput section of {args.output}")


if __name__ == "__main__":
    main()
