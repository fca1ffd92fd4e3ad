"""Training throughput on one GPU, kzoo against keras-hub side by side, in mixed_bfloat16.

Three model families, each with a kzoo and a keras-hub contender built on the same configuration:

- BERT-small (4 layers, hidden 512) and BERT-base (12 layers, hidden 768) masked-LM pretraining, batch 256 × 128
  tokens, 20 masked positions per sequence: kzoo's `BertPretrainer` (masked-LM and next-sentence heads) against
  keras-hub's `BertMaskedLM` (masked-LM only), built, fed and counted as in benchmarks/bench_bert.py.
- Transformer-base (6+6 blocks, d_model 512) translation training, batch 256 × (64 + 64) tokens, vocabulary 32,768:
  kzoo's `Transformer` against the same model from keras-hub's layers, as in benchmarks/bench_transformer.py.

Each contender trains on one fixed in-memory batch through `train_on_batch`; the two contenders of a family are
warmed up (the first step compiles) and timed in turns, and the report gives medians: ms/step, tokens/s, model
TFLOP/s (the analytic matmul FLOPs of the bench_* scripts) and model FLOPs utilisation against the GPU's dense
bf16 tensor-core peak from its datasheet (`BF16_PEAK_TFLOPS`, or --peak-tflops), beside a bf16 matmul measured in
the same run. `jit_compile` follows Keras's default ("auto": XLA on a GPU). Families run costliest first, and one
starts only if the time so far plus the previous family's time fits in --budget-minutes (default 7.5), so that a
full run ends in under 8 minutes; a family skipped or failed is named in the report.

It needs the project's environment on the GPU machine: TensorFlow with CUDA (`pip install "tensorflow[and-cuda]"` of
the pinned version), keras-hub and kzoo.

Usage:
    .venv/bin/python benchmarks/gpu.py --output benchmarks/RESULTS.md   # on a machine with one GPU
    .venv/bin/python benchmarks/gpu.py --smoke                          # tiny models on the CPU (CI runs it)
"""

import argparse
import dataclasses
import gc
import statistics
import sys
import time
import traceback

import bench_bert
import bench_transformer
import bert_models
import keras
import tensorflow as tf
from results_file import environment, replace_section
from timing import matmul_timer, time_training

import kzoo
from kzoo.models.bert_presets import SIZES

SECTION = "gpu-training"
PRECISION = "mixed_bfloat16"
# Dense bf16 tensor-core TFLOP/s from NVIDIA's datasheets (their "with sparsity" figures halved), matched against the
# device name in this order (the more specific first).
BF16_PEAK_TFLOPS = {
    "H200 NVL": 835,
    "H200": 989,
    "H100 NVL": 835,
    "H100 PCIe": 756,
    "H100": 989,
    "A100": 312,
    "L40S": 362,
    "L4": 121,
}
MATMUL_SIZES = {"gpu": 8192, "smoke": 512}


@dataclasses.dataclass
class Family:
    """One model family: its configuration (a bench_bert or bench_transformer `Config`), its contenders' builders
    ({name: config -> compiled model}), their batches ({name: batch}) and its FLOPs and tokens per step."""

    title: str
    config: object
    builders: dict
    batches: dict
    flops_per_step: int

    @property
    def tokens_per_step(self):
        return self.config.tokens_per_step


def bert_family(title, preset, smoke_sizes=None, batch_size=256):
    """kzoo's `BertPretrainer` on `kzoo.<preset>` (with `smoke_sizes` overriding its sizes) against keras-hub's
    `BertMaskedLM` on the same sizes."""
    overrides = smoke_sizes or {}
    sizes = {"intermediate_dim": 4 * SIZES[preset]["hidden_dim"], "max_sequence_length": 512, **SIZES[preset],
             **overrides}
    config = bert_models.Config(
        **sizes, batch_size=batch_size, **({"sequence_length": 32, "masked_positions": 4} if smoke_sizes else {})
    )

    def build_kzoo(config, precision):
        backbone = getattr(kzoo, preset)(dropout=config.dropout, dtype=precision,
                                         **{"vocabulary_size": config.vocabulary_size, **overrides})
        built = {key: getattr(backbone, key) for key in sizes}
        if built != sizes:
            raise ValueError(f"kzoo.{preset} built {built}, but the benchmark's configuration is {sizes}.")
        model = kzoo.models.BertPretrainer(backbone)
        model.compile(optimizer=bert_models.optimizer(config))
        return model

    batches = bench_bert.training_batches(config)
    return Family(title, config, {"kzoo": build_kzoo, "keras-hub": bert_models.build_keras_hub},
                  {name: batches[name] for name in ("kzoo", "keras-hub")}, bert_models.training_flops_per_step(config))


def transformer_family(title, config):
    def builder(build):
        return lambda config, precision: bench_transformer.compiled(build(config, precision))

    batch = bench_transformer.random_batch(config)
    return Family(
        title, config,
        {name: builder(build) for name, build in bench_transformer.BUILDERS.items()},
        {name: batch for name in bench_transformer.BUILDERS},
        bench_transformer.training_flops_per_step(config),
    )


def families(smoke):
    """Zero-argument functions making each family, the costliest first: a family starts only if the one before it
    would fit again in the time left, so each estimate errs long."""
    if smoke:
        tiny_bert = dict(vocabulary_size=512, num_layers=2, hidden_dim=64, num_heads=2, intermediate_dim=128,
                         max_sequence_length=64)
        return [
            lambda: bert_family("BERT-base masked-LM pretraining (smoke sizes)", "bert_base",
                                {**tiny_bert, "num_layers": 3}, 4),
            lambda: transformer_family("Transformer-base translation training (smoke sizes)", bench_transformer.Config(
                vocabulary_size=512, num_layers=1, hidden_dim=64, num_heads=2, intermediate_dim=128, batch_size=4,
                source_length=16, target_length=16)),
            lambda: bert_family("BERT-small masked-LM pretraining (smoke sizes)", "bert_small", tiny_bert, 4),
        ]
    return [
        lambda: bert_family("BERT-base masked-LM pretraining", "bert_base"),
        lambda: transformer_family("Transformer-base translation training", bench_transformer.Config(
            vocabulary_size=32768, batch_size=256, source_length=64, target_length=64)),
        lambda: bert_family("BERT-small masked-LM pretraining", "bert_small"),
    ]


def device_and_peak(peak_tflops):
    """(device description, bf16 peak FLOP/s or None, where the peak comes from)."""
    gpus = tf.config.list_physical_devices("GPU")
    name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU") if gpus else "CPU (no GPU)"
    if peak_tflops:
        return name, peak_tflops * 1e12, f"{peak_tflops:g} TFLOP/s, given with --peak-tflops"
    for key, tflops in BF16_PEAK_TFLOPS.items():
        if key in name:
            return name, tflops * 1e12, f"{tflops} TFLOP/s, the {key} datasheet's dense bf16 figure"
    return name, None, "unknown for this device: pass --peak-tflops for MFU"


def measured_matmul_flops(size, runs=10):
    seconds = matmul_timer("bfloat16", size)
    return 2 * size**3 / statistics.median(seconds() for _ in range(runs))


def run_family(family, args, jit_compile):
    """Build the family's contenders and time them in turns; their memory is freed however it ends."""
    models = {}
    try:
        for name, build in family.builders.items():
            keras.utils.set_random_seed(0)
            models[name] = build(family.config, PRECISION)
            models[name].jit_compile = jit_compile  # after compile, before the first step traces the train function
        return time_training(PRECISION, models, family.batches, family.tokens_per_step, args.steps, args.repeats,
                             args.warmup_steps)
    finally:
        models.clear()
        keras.backend.clear_session()
        gc.collect()


def family_rows(family, measurement, peak):
    rows = []
    for name in measurement.step_seconds:
        step = measurement.median_step_seconds(name)
        flops = family.flops_per_step / step
        mfu = f"{100 * flops / peak:.1f}%" if peak else "—"
        ratio = "—" if name == "keras-hub" else f"{measurement.ratio(name):.3f}"
        rows.append(f"| {family.title} | {name} | {measurement.parameters[name]:,} | {1e3 * step:.1f} | "
                    f"{family.tokens_per_step / step:,.0f} | {flops / 1e12:.2f} | {mfu} | {ratio} |")
    return rows


def report(results, args, env, device, peak, peak_source, matmul_flops, jit_compile, seconds):
    lines = [
        "## GPU training throughput: kzoo vs keras-hub, mixed_bfloat16",
        "",
        f"Command: `{env['command']}`  ",
        f"Date: {env['date']}  ",
        f"Device: {device}; host {env['cpu']}  ",
        f"Versions: {env['versions']}  ",
        f"bf16 peak for MFU: {peak_source}. A {MATMUL_SIZES['smoke' if args.smoke else 'gpu']}³ bfloat16 "
        f"`tf.linalg.matmul` ran at {matmul_flops / 1e12:.2f} TFLOP/s in this run.  ",
        f"`jit_compile={jit_compile}`; {args.warmup_steps} warm-up step(s) per contender, then {args.repeats} "
        f"repeats of {args.steps} timed step(s) each, contenders in turns; medians over repeats. Whole run: "
        f"{seconds / 60:.1f} minutes.",
        "",
        "| model | contender | parameters | ms/step | tokens/s | model TFLOP/s | MFU | kzoo ÷ keras-hub |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for family, outcome in results:
        if isinstance(outcome, str):
            notes.append(f"- {family.title}: {outcome}")
        else:
            lines += family_rows(family, outcome, peak)
    for family, _ in results:
        c = family.config
        notes.append(f"- {family.title}: " + ", ".join(f"{k} {v}" for k, v in dataclasses.asdict(c).items())
                     + f"; {family.tokens_per_step:,} tokens and {family.flops_per_step / 1e12:.3f} model TFLOP per "
                     "step.")
    return "\n".join(lines + ["", *notes, "",
                              "kzoo's BERT step also runs its next-sentence head (a hidden×2 dense layer on [CLS]), "
                              "work keras-hub's `BertMaskedLM` does not do; see benchmarks/bench_bert.py.", ""])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny models, 1 step, on whatever device there is")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per repeat (default 10)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per contender (default 5)")
    parser.add_argument("--warmup-steps", type=int, default=3, help="untimed steps, the first compiles (default 3)")
    parser.add_argument("--jit-compile", choices=("auto", "true", "false"), default="auto",
                        help="XLA: auto (Keras's default: on with a GPU), true or false")
    parser.add_argument("--peak-tflops", type=float, help="the device's dense bf16 peak, if not in BF16_PEAK_TFLOPS")
    parser.add_argument("--budget-minutes", type=float, default=7.5, help="start no family that would overrun this")
    parser.add_argument("--output", help=f"write the report into this file's `{SECTION}` section")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.repeats, args.warmup_steps = 1, 1, 1
    started = time.monotonic()
    gpus = tf.config.list_physical_devices("GPU")
    jit_compile = {"auto": bool(gpus), "true": True, "false": False}[args.jit_compile]
    env = environment()
    device, peak, peak_source = device_and_peak(args.peak_tflops)
    matmul_flops = measured_matmul_flops(MATMUL_SIZES["smoke" if args.smoke else "gpu"])
    print(f"{device}; bf16 peak {peak_source}; matmul {matmul_flops / 1e12:.2f} TFLOP/s; {env['versions']}",
          flush=True)

    results, last_seconds, failed = [], 0.0, False
    for make_family in families(args.smoke):
        family = make_family()
        elapsed = time.monotonic() - started
        if elapsed + last_seconds > 60 * args.budget_minutes:
            results.append((family, f"skipped: {elapsed / 60:.1f} minutes gone, the last family took "
                                    f"{last_seconds / 60:.1f}, the budget is {args.budget_minutes:g}"))
            continue
        print(f"{family.title}: {family.flops_per_step / 1e12:.3f} model TFLOP per step", flush=True)
        family_started = time.monotonic()
        try:
            results.append((family, run_family(family, args, jit_compile)))
        except Exception as error:  # one family's failure must not lose the others' numbers on a one-off GPU run
            traceback.print_exc()
            first_line = (str(error).splitlines() or [""])[0][:300]
            results.append((family, f"failed: {type(error).__name__}: {first_line}"))
            failed = True
        last_seconds = time.monotonic() - family_started

    text = report(results, args, env, device, peak, peak_source, matmul_flops, jit_compile,
                  time.monotonic() - started)
    print(text)
    if args.output:
        replace_section(args.output, SECTION, text)
        print(f"Wrote the {SECTION} section of {args.output}")
    if failed:
        sys.exit("At least one family failed; its error is in the report above.")


if __name__ == "__main__":
    main()
