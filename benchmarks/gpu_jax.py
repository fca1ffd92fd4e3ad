"""kzoo against keras-hub on one GPU under Keras's JAX backend, and a short Multi30k translation run there.

The GPU machine has JAX but no TensorFlow, so this script imports none: kzoo's modelling core, kzoo.train's loss,
schedule and callbacks, keras-hub's models and layers all run under `KERAS_BACKEND=jax`, on inputs made with numpy.

- Throughput: training steps of Transformer-base (kzoo's `Transformer` against the same model from keras-hub's
  layers, as benchmarks/transformer_models.py builds them; batch 256 × (64 + 64) tokens, vocabulary 32,768) and
  BERT-base masked-LM pretraining (kzoo's `BertPretrainer` on `kzoo.bert_base` against keras-hub's `BertMaskedLM`,
  as benchmarks/bert_models.py; batch 256 × 128 tokens, 20 masked positions), each in mixed_bfloat16 and float32,
  compiled by XLA (`jit_compile=True`). Per run both contenders warm up in turns, then each repeat times a
  `jax.numpy` matmul in the precision's compute dtype (the peak for MFU) and each contender's steps in turns.
  Reported: ms/step, tokens/s, model TFLOP/s (the analytic matmul FLOPs), the matmul's TFLOP/s, MFU and
  kzoo ÷ keras-hub, medians over repeats. Runs go bfloat16 first; one starts only if the time so far plus the
  previous run's fits in --budget-minutes.
- Translation: the recipe's Transformer (transformer_small) trained for --train-minutes on Multi30k batches that
  `export` pre-tokenized here with TensorFlow (benchmarks/gpu_jax_translation.py), loss and accuracy per epoch and
  tokens/s, then greedy decoding of the val sources to ids, written beside the report for `score`.

Usage (see benchmarks/README.md for the device command and what it carries):
    .venv/bin/python benchmarks/gpu_jax.py export --data .gpu/multi30k.npz              # here, TensorFlow
    KERAS_BACKEND=jax python benchmarks/gpu_jax.py --data .gpu/multi30k.npz --output $OUT/RESULTS_gpu.md  # GPU
    .venv/bin/python benchmarks/gpu_jax.py score --data .gpu/multi30k.npz --report DIR/RESULTS_gpu.md \\
        --output benchmarks/RESULTS.md                                                  # here: BLEU, section
    Add --smoke to each for tiny sizes on the CPU.
"""

import argparse
import dataclasses
import gc
import json
import os
import pathlib
import platform
import statistics
import sys
import time
import traceback

import numpy as np

SECTION = "gpu-jax"
PRECISIONS = ("mixed_bfloat16", "float32")  # bfloat16 first: the run that matters most on a GPU
COMPUTE_DTYPES = {"float32": "float32", "mixed_bfloat16": "bfloat16"}
IDS_FILE = "multi30k_val_greedy_ids.npz"
NOT_RUN = "Not run: no GPU was lent to this session (2026-12-02)."


# === Throughput ===


@dataclasses.dataclass
class Family:
    """One model family: its configuration, {contender: config, precision -> compiled model}, {contender: batch}."""

    title: str
    config: object
    builders: dict
    batches: dict
    flops_per_step: int


def bert_family(smoke):
    import bert_models

    from kzoo.models.bert_presets import SIZES

    tiny = dict(num_layers=1, hidden_dim=64, num_heads=2, intermediate_dim=128, max_sequence_length=64) if smoke else {}
    sizes = {"intermediate_dim": 4 * SIZES["bert_base"]["hidden_dim"], "max_sequence_length": 512,
             **SIZES["bert_base"], **tiny}
    shape = dict(vocabulary_size=512, batch_size=4, sequence_length=32, masked_positions=4) if smoke else dict(
        batch_size=256)
    config = bert_models.Config(**sizes, **shape)

    def kzoo(config, precision):
        return bert_models.build_kzoo(config, precision, "bert_base", **tiny)

    return Family("BERT-base masked-LM pretraining" + (" (smoke sizes)" if smoke else ""), config,
                  {"kzoo": kzoo, "keras-hub": bert_models.build_keras_hub}, bert_batches(config),
                  bert_models.training_flops_per_step(config))


def bert_batches(config, seed=0):
    """{contender: (x, y, sample_weight)} as benchmarks/bench_bert.py feeds them, made with numpy: random ids in
    [1, vocabulary_size), no padding, segment 0 then 1, `masked_positions` distinct sorted positions after [CLS]."""
    rng = np.random.default_rng(seed)
    b, s, p, v = config.batch_size, config.sequence_length, config.masked_positions, config.vocabulary_size
    inputs = {"token_ids": rng.integers(1, v, (b, s), dtype=np.int32),
              "segment_ids": np.tile((np.arange(s) >= s // 2).astype(np.int32), (b, 1)),
              "padding_mask": np.ones((b, s), np.int32)}
    positions = np.sort(np.argsort(rng.random((b, s - 1)), axis=1)[:, :p] + 1, axis=1).astype(np.int32)
    masked_ids = rng.integers(1, v, (b, p), dtype=np.int32)
    weights = np.ones((b, p), np.float32)
    next_sentence = rng.integers(0, 2, (b,), dtype=np.int32)
    return {
        "kzoo": ({**inputs, "masked_positions": positions}, {"mlm": masked_ids, "nsp": next_sentence},
                 {"mlm": weights, "nsp": np.ones((b,), np.float32)}),
        "keras-hub": ({**inputs, "mask_positions": positions}, masked_ids, weights),
    }


def transformer_family(smoke):
    import keras
    import transformer_models

    config = transformer_models.Config(
        **(dict(vocabulary_size=512, num_layers=1, hidden_dim=64, num_heads=2, intermediate_dim=128, batch_size=4,
                source_length=16, target_length=16) if smoke else
           dict(vocabulary_size=32768, batch_size=256, source_length=64, target_length=64)))

    def compiled(build):
        def builder(config, precision):
            model = build(config, precision)
            model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-4),
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            return model
        return builder

    rng = np.random.default_rng(0)

    def ids(length):
        return rng.integers(1, config.vocabulary_size, (config.batch_size, length), dtype=np.int32)

    batch = ({"encoder_token_ids": ids(config.source_length), "decoder_token_ids": ids(config.target_length)},
             ids(config.target_length))
    return Family("Transformer-base translation training" + (" (smoke sizes)" if smoke else ""), config,
                  {name: compiled(build) for name, build in transformer_models.BUILDERS.items()},
                  {name: batch for name in transformer_models.BUILDERS},
                  transformer_models.training_flops_per_step(config))


def matmul_timer(dtype, size):
    """A function timing one (size × size) @ (size × size) `jax.numpy` matmul in `dtype`, compiled, to completion."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(1)
    a, b = (jnp.asarray(rng.uniform(-1, 1, (size, size)).astype(np.float32), dtype) for _ in range(2))
    matmul = jax.jit(jnp.matmul)
    matmul(a, b).block_until_ready()

    def seconds():
        start = time.perf_counter()
        matmul(a, b).block_until_ready()
        return time.perf_counter() - start

    return seconds


def seconds_per_step(model, batch, steps):
    start = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(*batch)  # returns the loss as Python floats: the step has finished
    return (time.perf_counter() - start) / steps


@dataclasses.dataclass
class Measurement:
    precision: str
    parameters: dict
    step_seconds: dict  # contender -> [seconds per step, one per repeat]
    matmul_flops: list  # [matmul FLOP/s, one per repeat]


def measure(family, precision, args):
    """Build both contenders under `precision`, warm them up in turns, then time the matmul and each in turns."""
    import keras

    models = {}
    try:
        for name, build in family.builders.items():
            keras.utils.set_random_seed(0)
            models[name] = build(family.config, precision)
            models[name].jit_compile = True  # XLA, before the first step traces the train function
        for _ in range(args.warmup_steps):
            for name, model in models.items():
                seconds_per_step(model, family.batches[name], 1)
        size = args.matmul_size
        matmul = matmul_timer(COMPUTE_DTYPES[precision], size)
        result = Measurement(precision, {name: model.count_params() for name, model in models.items()},
                             {name: [] for name in models}, [])
        for repeat in range(args.repeats):
            result.matmul_flops.append(2 * size**3 / statistics.median(matmul() for _ in range(5)))
            line = f"{family.title}, {precision}, repeat {repeat + 1}/{args.repeats}: matmul " \
                   f"{result.matmul_flops[-1] / 1e12:.1f} TFLOP/s"
            for name, model in models.items():
                seconds = seconds_per_step(model, family.batches[name], args.steps)
                result.step_seconds[name].append(seconds)
                line += f"; {name} {1e3 * seconds:.1f} ms/step"
            print(line, flush=True)
        return result
    finally:
        models.clear()
        keras.backend.clear_session()
        gc.collect()


def tokens_per_step(config):
    return config.tokens_per_step


def throughput_rows(family, m):
    rows = []
    tokens = tokens_per_step(family.config)
    for name, seconds in m.step_seconds.items():
        step = statistics.median(seconds)
        mfu = statistics.median(family.flops_per_step / s / peak for s, peak in zip(seconds, m.matmul_flops))
        hub = m.step_seconds["keras-hub"]
        ratio = "—" if name == "keras-hub" else f"{statistics.median(h / k for k, h in zip(seconds, hub)):.3f}"
        rows.append(f"| {family.title} | {m.precision} | {name} | {m.parameters[name]:,} | {1e3 * step:.1f} | "
                    f"{tokens / step:,.0f} | {family.flops_per_step / step / 1e12:.2f} | "
                    f"{COMPUTE_DTYPES[m.precision]} {statistics.median(m.matmul_flops) / 1e12:.1f} | "
                    f"{100 * mfu:.1f}% | {ratio} |")
    return rows


def run_throughput(args, started):
    """[(family, precision, Measurement or a sentence why not)], families and precisions within the budget."""
    results, last_seconds, families = [], 0.0, []
    for make in (bert_family, transformer_family):
        try:
            families.append(make(args.smoke))
        except Exception as error:  # keras-hub not importable, say: the translation part still runs
            traceback.print_exc()
            results.append((Family(make.__name__, None, {}, {}, 0), "all", f"failed: {type(error).__name__}: "
                            f"{(str(error).splitlines() or [''])[0][:300]}"))
    for precision in PRECISIONS:
        for family in families:
            elapsed = time.monotonic() - started
            if elapsed + last_seconds > 60 * args.budget_minutes:
                results.append((family, precision, f"skipped: {elapsed / 60:.1f} minutes gone, the last run took "
                                f"{last_seconds / 60:.1f}, the throughput budget is {args.budget_minutes:g}"))
                continue
            run_started = time.monotonic()
            try:
                results.append((family, precision, measure(family, precision, args)))
            except Exception as error:  # one run's failure must not lose the others' numbers on a one-off GPU
                traceback.print_exc()
                first_line = (str(error).splitlines() or [""])[0][:300]
                results.append((family, precision, f"failed: {type(error).__name__}: {first_line}"))
            last_seconds = time.monotonic() - run_started
    return results


# === Report ===


def environment():
    import jax
    import keras

    import kzoo

    try:
        import keras_hub

        hub = keras_hub.__version__
    except ImportError as error:  # reported, and the keras-hub contenders then fail with the same reason
        hub = f"not importable ({error})"
    devices = jax.devices()
    return {
        "device": f"{devices[0].device_kind} ({devices[0].platform}), {len(devices)} device(s)",
        "versions": f"Python {platform.python_version()}, JAX {jax.__version__}, Keras {keras.__version__} "
                    f"(backend {keras.backend.backend()}), keras-hub {hub}, kzoo {kzoo.__version__}, "
                    f"numpy {np.__version__}",
        "tensorflow": sorted(m for m in sys.modules if m == "tensorflow" or m.startswith("tensorflow.")),
    }


def translation_lines(rows, summary):
    config = summary["config"]
    lines = [
        "### Multi30k translation, on the GPU under JAX",
        "",
        f"The recipe's model (`kzoo.train.translation_recipe.build_model`/`compile_model`: transformer_small, "
        f"{config.encoder_layers}+{config.decoder_layers} blocks, d_model {config.hidden_dim}, vocabulary "
        f"{summary['meta']['vocabulary_size']}, {summary['parameters']:,} parameters, {config.dtype}) on "
        f"{summary['meta']['pairs']['train']:,} training pairs pre-tokenized by `export` (the recipe's "
        f"SubwordTokenizer and length-bucketed batches of {config.max_tokens} tokens a side, padded to their bucket "
        f"here so XLA compiles one step per bucket), {summary['steps_per_epoch']} steps an epoch, "
        f"`TimeBudget({summary['minutes']:g} minutes)`: {summary['steps']} steps in "
        f"{summary['train_seconds'] / 60:.1f} minutes. tokens/s: the epoch's steps × the mean real (not padding) "
        "source + target tokens of a training batch, over its training time (validation left out; epoch 1 "
        "includes XLA compilation); accuracy is `MaskedAccuracy` over real target tokens.",
        "",
        "| epoch | loss | accuracy | val loss | val accuracy | steps | seconds | tokens/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(f"| {row['epoch']} | {row['loss']:.3f} | {row['accuracy']:.3f} | {row['val_loss']:.3f} "
                     f"| {row['val_accuracy']:.3f} | {row['steps']} | {row['seconds']:.1f} "
                     f"| {row['tokens_per_second']:,.0f} |")
    lines += ["", f"Greedy decoding (`encode` / `initial_cache` / `decode_step`, one jitted step) of "
                  f"{summary['sentences']:,} val sentences: {summary['decode_seconds']:.1f} s, "
                  f"{summary['ended']:,} ended with the end token. BLEU: see the line below, added by `score`.", ""]
    return lines


def report(results, translation, args, env, seconds):
    lines = [
        "## GPU under Keras's JAX backend: kzoo vs keras-hub, and Multi30k training",
        "",
        f"Command: `KERAS_BACKEND={os.environ.get('KERAS_BACKEND', '')} python {' '.join(sys.argv)}`  ",
        f"Date: {time.strftime('%Y-%m-%dT%H:%M:%S%z')}  ",
        f"Device: {env['device']}  ",
        f"Versions: {env['versions']}  ",
        f"TensorFlow modules loaded: {len(env['tensorflow'])}. Whole run: {seconds / 60:.1f} minutes.",
        "",
        "### Training throughput",
        "",
        f"`jit_compile=True` (XLA); {args.warmup_steps} warm-up step(s) per contender in turns, then {args.repeats} "
        f"repeats, each timing five {args.matmul_size}³ `jax.numpy` matmuls in the precision's compute dtype "
        f"(median: the peak) and {args.steps} step(s) of each contender; medians over repeats (MFU and the ratio "
        "of per-repeat values). Model FLOPs are the analytic matmul counts of benchmarks/transformer_models.py and "
        "bert_models.py (forward × 3). JAX's default matmul precision applies to the peak and the models alike.",
        "",
        "| model | precision | contender | parameters | ms/step | tokens/s | model TFLOP/s | matmul TFLOP/s | MFU "
        "| kzoo ÷ keras-hub |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for family, precision, outcome in results:
        if isinstance(outcome, str):
            notes.append(f"- {family.title}, {precision}: {outcome}")
        else:
            lines += throughput_rows(family, outcome)
    for family in {id(f): f for f, _, _ in results if f.config is not None}.values():
        notes.append(f"- {family.title}: " + ", ".join(f"{k} {v}" for k, v in dataclasses.asdict(family.config).items())
                     + f"; {tokens_per_step(family.config):,} tokens and {family.flops_per_step / 1e12:.3f} model "
                     "TFLOP per step.")
    lines += ["", *notes, "- kzoo's BERT step also runs its next-sentence head (hidden×2 on [CLS]), which "
              "keras-hub's `BertMaskedLM` does not.", ""]
    if isinstance(translation, str):
        lines += ["### Multi30k translation, on the GPU under JAX", "", translation, ""]
    else:
        lines += translation_lines(*translation)
    return "\n".join(lines)


def main_gpu(args):
    from results_file import replace_section

    started = time.monotonic()
    env = environment()
    print(f"{env['device']}; {env['versions']}", flush=True)
    results = run_throughput(args, started)
    output = pathlib.Path(args.output) if args.output else None
    if output:  # the throughput table survives a run cut short during the translation part
        output.parent.mkdir(parents=True, exist_ok=True)
        replace_section(output, SECTION, report(results, "not finished: the run ended before the translation part "
                                                "did", args, env, time.monotonic() - started))
    ids_path = (output.parent if output else pathlib.Path(".")) / IDS_FILE
    try:
        import gpu_jax_translation

        rows, summary = gpu_jax_translation.train(args.data, args.train_minutes, ids_path, smoke=args.smoke)
        translation = (rows, {**summary, "minutes": args.train_minutes})
        print(f"wrote {ids_path}", flush=True)
    except Exception as error:
        traceback.print_exc()
        translation = f"failed: {type(error).__name__}: {(str(error).splitlines() or [''])[0][:300]}"
    env["tensorflow"] = sorted(m for m in sys.modules if m == "tensorflow" or m.startswith("tensorflow."))
    text = report(results, translation, args, env, time.monotonic() - started)
    print(text)
    if output:
        replace_section(output, SECTION, text)
        print(f"Wrote the {SECTION} section of {output}")
    failed = [outcome for _, _, outcome in results if isinstance(outcome, str) and outcome.startswith("failed")]
    if failed or isinstance(translation, str):
        sys.exit("At least one part failed; its error is in the report above.")


# === export and score (here, with TensorFlow) ===


def main_export(args):
    import gpu_jax_translation

    summary = gpu_jax_translation.export(args.data, smoke=args.smoke)
    print(json.dumps(summary))


def main_score(args):
    import gpu_jax_translation
    from results_file import read_section, replace_section

    report_path = pathlib.Path(args.report)
    section = read_section(report_path, SECTION)
    if section is None:
        raise SystemExit(f"{report_path} has no {SECTION} section: pass the RESULTS_gpu.md the GPU run wrote.")
    scores, samples = gpu_jax_translation.score(args.data, report_path.parent / IDS_FILE)
    line = (f"Greedy val BLEU {scores['bleu']:.2f}, chrF {scores['chrf']:.2f} (sacrebleu {scores['bleu_signature']}),"
            " scored here by `gpu_jax.py score` from the ids the GPU run wrote.")
    samples = [f"- {source} → {hypothesis} (reference: {reference})" for source, hypothesis, reference in samples]
    section = section.replace(" BLEU: see the line below, added by `score`.", "") + "\n\n" + "\n".join([line, "",
                                                                                                     *samples])
    print(section)
    replace_section(args.output, SECTION, section)
    print(f"Wrote the {SECTION} section of {args.output}")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", nargs="?", default="gpu", choices=("gpu", "export", "score"),
                        help="gpu (default: the JAX run), export or score (here, with TensorFlow)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes and data, for the CPU")
    parser.add_argument("--data", default=".gpu/multi30k.npz", help="the exported Multi30k ids (default %(default)s)")
    parser.add_argument("--output", help=f"write the report into this file's `{SECTION}` section")
    parser.add_argument("--report", help="score: the RESULTS_gpu.md the GPU run wrote (its ids lie beside it)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per repeat (default 5)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per run (default 3)")
    parser.add_argument("--warmup-steps", type=int, default=2, help="untimed steps, the first compiles (default 2)")
    parser.add_argument("--matmul-size", type=int, default=8192, help="n of the n³ matmul peak (default 8192)")
    parser.add_argument("--budget-minutes", type=float, default=4.5,
                        help="throughput: start no run that would overrun this (default 4.5)")
    parser.add_argument("--train-minutes", type=float, default=2.0, help="translation training budget (default 2)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.repeats, args.warmup_steps, args.matmul_size = 1, 1, 1, 256
        args.train_minutes = min(args.train_minutes, 0.5)
    for flag in ("steps", "repeats", "warmup_steps", "matmul_size"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')}={getattr(args, flag)} must be at least 1.")
    if args.step == "gpu":
        import keras

        if keras.backend.backend() != "jax":
            parser.error(f"the GPU run needs KERAS_BACKEND=jax (Keras is on {keras.backend.backend()!r}).")
        if not pathlib.Path(args.data).is_file():
            parser.error(f"--data={args.data}: no such file; make it here with `gpu_jax.py export --data "
                         f"{args.data}` and carry it.")
    if args.step == "score" and not (args.report and args.output):
        parser.error("score needs --report (the GPU run's RESULTS_gpu.md) and --output (benchmarks/RESULTS.md).")
    return args


def main(argv=None):
    args = parse_args(argv)
    {"gpu": main_gpu, "export": main_export, "score": main_score}[args.step](args)


if __name__ == "__main__":
    main()
