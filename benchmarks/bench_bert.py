"""Pretraining and inference speed of kzoo's BERT against keras-hub's, on BERT-Small, in one process.

Training: masked-LM pretraining steps at batch 32 × 128 tokens, 20 masked positions per sequence, for three
contenders built on the same configuration (4 layers, hidden 512, 8 heads, intermediate 2048, vocabulary 30,522,
512 positions, dropout 0.1): kzoo's `BertPretrainer` on `kzoo.bert_small` (masked-LM and next-sentence heads), the
same kzoo model cut down to its masked-LM output (no next-sentence head, like keras-hub's), and keras-hub's
`BertMaskedLM` on a `BertBackbone`. Each trains with AdamW on one fixed in-memory batch through `train_on_batch` in
graph mode (`jit_compile=False`). Per precision, the script times a 2048³ matmul (the peak for MFU) and the
contenders in turns, and reports tokens/s, the kzoo / keras-hub ratio and model FLOPs utilisation, as medians.

Inference: the two backbones alone, each called in a `tf.function` (no XLA) with `training=False`, in turns:
latency at batch 1 × 128 tokens and throughput at batch 64 × 128 tokens.

Usage:
    .venv/bin/python benchmarks/bench_bert.py --output benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_bert.py --quick
"""

import statistics
from dataclasses import asdict, dataclass

import keras
import tensorflow as tf
from bert_models import BUILDERS, Config, backbone_flops, training_flops_per_step
from results_file import environment, replace_section
from timing import (
    MATMUL_RUNS,
    MATMUL_SIZE,
    TRAINING_TABLE,
    Measurement,
    OtherLoad,
    header,
    interleaved,
    median_ratio,
    parse_training_args,
    time_training,
    timer,
    training_rows,
)

SECTION = "bert-speed"
INFERENCE_CALLS = {1: 10, 64: 1}  # inference batch size -> calls timed per repeat
TARGETS = {"float32": 1.0, "mixed_bfloat16": 1.2}  # the targets for kzoo / keras-hub training tokens/s
EARLIER_KERAS_HUB = {"float32": 1600, "mixed_bfloat16": 2300}  # keras-hub training tokens/s quoted in the issue


@dataclass
class Run:
    """One precision's measurements: training steps, inference calls, and the contenders' parameter counts."""

    training: Measurement
    inference: dict  # batch size -> {backbone name: [seconds per call, one per repeat]}
    parameters: dict  # model name -> {"total", "backbone", "masked-LM head", "next-sentence head"}


# === Models ===

BACKBONES = ("kzoo", "keras-hub")  # the contenders whose backbones are timed for inference


def parameter_parts(model):
    total, backbone = model.count_params(), model.backbone.count_params()
    next_sentence = model.next_sentence_head.count_params() if hasattr(model, "next_sentence_head") else 0
    return {
        "total": total,
        "backbone": backbone,
        "masked-LM head": total - backbone - next_sentence,  # its own weights: the vocabulary projection is tied
        "next-sentence head": next_sentence,
    }


# === Data ===


def backbone_inputs(config, batch_size, generator):
    """Random token ids in [1, vocabulary_size), no padding (every token counts), segment 0 then 1 at half length."""
    length = config.sequence_length
    return {
        "token_ids": generator.uniform((batch_size, length), 1, config.vocabulary_size, dtype=tf.int32),
        "segment_ids": tf.tile(tf.cast(tf.range(length) >= length // 2, tf.int32)[None], [batch_size, 1]),
        "padding_mask": tf.ones((batch_size, length), tf.int32),
    }


def training_batches(config):
    """{contender: (x, y, sample_weight)}, one pretraining batch in each contender's input and label names.

    Every sequence has `masked_positions` distinct, sorted positions after [CLS], all real (weight 1), with random
    target ids in [1, vocabulary_size); next-sentence labels are random.
    """
    generator = tf.random.Generator.from_seed(0)
    b, p = config.batch_size, config.masked_positions
    inputs = backbone_inputs(config, b, generator)
    scores = generator.uniform((b, config.sequence_length - 1))
    positions = tf.sort(tf.math.top_k(scores, p).indices + 1, axis=-1)  # (batch, predictions)
    masked_ids = generator.uniform((b, p), 1, config.vocabulary_size, dtype=tf.int32)
    weights = tf.ones((b, p))
    next_sentence = generator.uniform((b,), 0, 2, dtype=tf.int32)
    kzoo_inputs = {**inputs, "masked_positions": positions}
    return {
        "kzoo": (kzoo_inputs, {"mlm": masked_ids, "nsp": next_sentence}, {"mlm": weights, "nsp": tf.ones((b,))}),
        "kzoo (MLM only)": (kzoo_inputs, masked_ids, weights),
        "keras-hub": ({**inputs, "mask_positions": positions}, masked_ids, weights),
    }


# === Timing ===


def measure_inference(config, precision, backbones, repeats):
    """{batch size: {name: [seconds per call]}}: each backbone's `training=False` call in a `tf.function`, in turns."""
    generator = tf.random.Generator.from_seed(1)
    times = {}
    for batch_size, calls in INFERENCE_CALLS.items():
        inputs = backbone_inputs(config, batch_size, generator)
        timers = {
            name: timer(tf.function(lambda x, backbone=backbone: backbone(x, training=False), jit_compile=False),
                        inputs, calls)
            for name, backbone in backbones.items()
        }
        times[batch_size] = interleaved(timers, repeats)
        print(f"{precision:>14}  inference batch {batch_size}: " + ", ".join(
            f"{name} {1e3 * statistics.median(seconds):.1f} ms/call" for name, seconds in times[batch_size].items()
        ), flush=True)
    return times


def measure(config, precision, args):
    """Build and compile the contenders under `precision`, time their training in turns with the matmul, then time
    the kzoo and keras-hub backbones' inference in turns."""
    models = {}
    for name, build in BUILDERS.items():
        keras.utils.set_random_seed(0)
        models[name] = build(config, precision)
    parameters = {name: parameter_parts(model) for name, model in models.items()}
    training = time_training(
        precision, models, training_batches(config), config.tokens_per_step, args.steps, args.repeats,
        args.warmup_steps,
    )
    backbones = {name: models[name].backbone for name in BACKBONES}
    return Run(training, measure_inference(config, precision, backbones, args.repeats), parameters)


# === Report ===


def check(flag):
    return "met" if flag else "**not met**"


def parameter_note(config, runs):
    """The parameter counts of every contender, and whether they agree once the next-sentence head is taken off."""
    parts = runs[0].parameters
    counts = {(run.training.precision, name): part["total"] - part["next-sentence head"]
              for run in runs for name, part in run.parameters.items()}
    described = "; ".join(
        f"{name} {part['total']:,} = backbone {part['backbone']:,} + masked-LM head {part['masked-LM head']:,}"
        + (f" + next-sentence head {part['next-sentence head']:,}" if part["next-sentence head"] else "")
        for name, part in parts.items()
    )
    same = len(set(counts.values())) == 1 and len({part["backbone"] for part in parts.values()}) == 1
    return (
        f"Parameters: {described}. The masked-LM heads' own weights are a {config.hidden_dim}×"
        f"{config.hidden_dim} dense layer with bias, a layer norm and a vocabulary bias; both project onto the "
        "vocabulary with the tied token embedding, counted in the backbone. Same counts once kzoo's next-sentence "
        f"head is taken off, in every precision: {check(same)}."
    )


def ratio_to_keras_hub(measurement, name):
    return "—" if name == "keras-hub" else f"{measurement.ratio(name):.3f}"


def target_lines(config, runs):
    lines = []
    for run in runs:
        m = run.training
        target, earlier = TARGETS[m.precision], EARLIER_KERAS_HUB[m.precision]
        hub = config.tokens_per_step / m.median_step_seconds("keras-hub")
        lines.append(
            f"- {m.precision}: kzoo / keras-hub = {m.ratio():.3f} (next-sentence head included), "
            f"{m.ratio('kzoo (MLM only)'):.3f} (MLM only); target ≥ {target}: {check(m.ratio() >= target)}. "
            f"keras-hub ran at {hub:,.0f} tokens/s here; the issue quoted about {earlier:,}."
        )
    peaks = {run.training.precision: run.training.peak_flops for run in runs}
    if len(peaks) == 2:
        lines.append(
            f"- The bfloat16 matmul peak was {peaks['mixed_bfloat16'] / peaks['float32']:.2f}× the float32 one in "
            "this run (each the median over its own precision's repeats)."
        )
    return lines


def inference_rows(config, runs):
    rows = []
    for run in runs:
        for batch_size, times in run.inference.items():
            flops = backbone_flops(config, batch_size)
            for name, seconds in times.items():
                call = statistics.median(seconds)
                each = ", ".join(f"{1e3 * s:.1f}" for s in seconds)
                ratio = "—" if name == "keras-hub" else f"{median_ratio(seconds, times['keras-hub']):.3f}"
                rows.append(
                    f"| {run.training.precision} | {batch_size} × {config.sequence_length} | {name} | "
                    f"{1e3 * call:.1f} | {each} | {batch_size * config.sequence_length / call:,.0f} | "
                    f"{flops / call / 1e9:.1f} | {ratio} |"
                )
    return rows


def report(config, runs, args, env, other_cores):
    flops = training_flops_per_step(config)
    steps, repeats, warmup_steps = args.steps, args.repeats, args.warmup_steps
    lines = [
        *header("BERT-Small pretraining and inference: kzoo vs keras-hub", env, other_cores),
        "### Configuration",
        "",
        ", ".join(f"{key} {value}" for key, value in asdict(config).items()) + ".  ",
        f"Tokens per step: {config.tokens_per_step:,} = batch {config.batch_size} × {config.sequence_length} tokens, "
        f"no padding; the masked-LM head runs at {config.masked_positions} positions per sequence.  ",
        parameter_note(config, runs),
        "",
        "- **kzoo**: `kzoo.models.BertPretrainer(kzoo.bert_small(vocabulary_size=30522, dtype=precision))` with its "
        "default losses (masked-LM cross-entropy over the real masked slots + next-sentence cross-entropy) and "
        "metrics. Its step also runs the next-sentence head (a 512×2 dense layer on the pooled [CLS] vector), its "
        "loss and metric, and back-propagates through the pooler: a tiny share of the work, but work keras-hub's "
        "step does not do.",
        "- **kzoo (MLM only)**: the same kzoo model cut at its masked-LM output (`keras.Model(pretrainer.input, "
        "pretrainer.output['mlm'])`), with the pretrainer's masked-LM loss and metric: the like-for-like "
        "comparison with keras-hub's `BertMaskedLM`.",
        "- **keras-hub**: `keras_hub.models.BertMaskedLM(keras_hub.models.BertBackbone(...), preprocessor=None)` "
        "with its default loss (sparse cross-entropy from logits, masked weights as sample weights) and weighted "
        "accuracy.",
        "- Same for all: AdamW (learning rate 1e-4, weight decay 0.01 except biases and layer norms, epsilon 1e-6), "
        "dropout 0.1, `jit_compile=False`, one fixed in-memory batch through `train_on_batch`, weights from seed 0.",
        "- Differences left as each library ships them: kzoo's feed-forward and masked-LM transform use the exact "
        "(erf) GELU, as BERT checkpoints do, keras-hub's the tanh approximation; kzoo's masked-LM logits are float32 "
        "under mixed_bfloat16, keras-hub's are bfloat16 until its loss casts them.",
        "",
        "### Method",
        "",
        f"Per precision, the three contenders are built, compiled and warmed up ({warmup_steps} steps each, in "
        f"turns); then each of {repeats} repeats times {MATMUL_RUNS} matmuls, then each contender for {steps} "
        "training step(s), so the machine's load hits all of them alike. s/step is the median over repeats (each "
        "repeat's mean is listed too); MFU and the ratios are medians of per-repeat values, so a repeat that "
        "another process slowed counts once.",
        "",
        f"Model FLOPs per training step: {flops / 1e9:.1f} GFLOP, counted analytically as "
        "3 × [L·(8·b·s·d² + 4·b·s²·d + 4·b·s·d·f) + 2·b·d² + 2·b·p·d² + 2·b·p·d·V] with L layers, batch b, "
        "s tokens, hidden d, intermediate f, p masked positions and vocabulary V: per block the Q, K, V and O "
        "projections, QKᵀ and AV, the feed-forward layer; the pooler; the masked-LM transform and the tied "
        "vocabulary projection at the masked positions only; × 3 for forward and backward. Embedding lookups, "
        "softmax, layer norms, element-wise work and the next-sentence head (2·b·d·2) are not counted; the "
        "pooler is counted for all three, though only kzoo's full step back-propagates through it (the others' "
        "optimizers warn that the pooler has no gradient): 3·2·b·d² = 0.05 GFLOP, nothing at this scale. Model "
        "GFLOP/s = that ÷ s/step. Peak = `tf.linalg.matmul` of two "
        f"{MATMUL_SIZE}×{MATMUL_SIZE} matrices in a `tf.function`, in the precision's compute dtype (bfloat16 for "
        "mixed_bfloat16), median over the precision's repeats. MFU = model GFLOP/s ÷ peak. "
        "Ratio = contender tokens/s ÷ keras-hub tokens/s.",
        "",
        "Inference: the kzoo and keras-hub backbones (no heads) after their training steps, each called as "
        "`tf.function(lambda x: backbone(x, training=False), jit_compile=False)` on random token ids (no padding); "
        "`.numpy()` on both outputs (sequence and pooled) ends each call. Per batch size both are traced and warmed "
        f"up (2 calls each), then each of {repeats} repeats times "
        + " and ".join(f"{calls} call(s) at batch {batch}" for batch, calls in INFERENCE_CALLS.items())
        + " of each backbone in turn. ms/call is the median over repeats; tokens/s = batch × tokens ÷ ms/call; model "
        "GFLOP/s counts the forward matmuls, L·(8·b·s·d² + 4·b·s²·d + 4·b·s·d·f) + 2·b·d²; the ratio (kzoo speed ÷ "
        "keras-hub speed) is the median of per-repeat ratios.",
        "",
        "### Pretraining steps",
        "",
        *(line.format(ratio="÷ keras-hub") for line in TRAINING_TABLE),
        *training_rows([run.training for run in runs], flops, config.tokens_per_step, ratio_to_keras_hub),
        "",
        "Targets from the issue (kzoo with its next-sentence head against keras-hub, tokens/s, within this run):",
        "",
        *target_lines(config, runs),
        "",
        "### Inference (backbones only)",
        "",
        "| precision | batch × tokens | model | ms/call | ms/call per repeat | tokens/s | model GFLOP/s "
        "| ÷ keras-hub |",
        "|---|---|---|---|---|---|---|---|",
        *inference_rows(config, runs),
        "",
        "Numbers on this shared 2-core machine move 4–8% from run to run, and up to 2× while another process takes "
        "a core: compare the models within one run, not across runs.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    args = parse_training_args(__doc__, SECTION, argv)
    config = Config()
    other_load = OtherLoad()
    env = environment()
    print(f"{env['cpu']}; {env['versions']}")
    print(f"Model FLOPs per training step: {training_flops_per_step(config) / 1e9:.1f} GFLOP", flush=True)
    runs = [measure(config, precision, args) for precision in args.precisions]
    text = report(config, runs, args, env, other_load.cores())
    print(text)
    if args.output:
        replace_section(args.output, SECTION, text)
        print(f"Wrote the {SECTION} section of {args.output}")


if __name__ == "__main__":
    main()
