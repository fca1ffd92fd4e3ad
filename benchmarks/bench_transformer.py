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

import math
from dataclasses import asdict, dataclass

import keras
import keras_hub
import tensorflow as tf
from keras import ops
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

import kzoo


@dataclass(frozen=True)
class Config:
    vocabulary_size: int = 8192
    num_layers: int = 6  # encoder blocks, and as many decoder blocks
    hidden_dim: int = 512
    num_heads: int = 8
    intermediate_dim: int = 2048
    dropout: float = 0.1
    batch_size: int = 64
    source_length: int = 32
    target_length: int = 32

    @property
    def tokens_per_step(self):
        """Source plus target tokens in one training batch."""
        return self.batch_size * (self.source_length + self.target_length)


# === Models ===


def build_kzoo(config, dtype):
    return kzoo.models.Transformer(
        source_vocabulary_size=config.vocabulary_size,
        num_encoder_layers=config.num_layers,
        num_decoder_layers=config.num_layers,
        hidden_dim=config.hidden_dim,
        num_heads=config.num_heads,
        intermediate_dim=config.intermediate_dim,
        dropout=config.dropout,
        share_embeddings=False,
        tie_output_embedding=True,
        activation="relu",
        normalize_first=False,
        dtype=dtype,
        name="kzoo_transformer",
    )


def build_keras_hub(config, dtype):
    """The same Transformer from keras-hub's layers, with the functional API, mirroring kzoo's structure."""

    def embedding(name):
        return keras_hub.layers.ReversibleEmbedding(
            config.vocabulary_size,
            config.hidden_dim,
            tie_weights=True,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=config.hidden_dim**-0.5),
            dtype=dtype,
            name=name,
        )

    def embed(token_ids, token_embedding, name):
        x = ops.multiply(token_embedding(token_ids), math.sqrt(config.hidden_dim))
        x = x + keras_hub.layers.SinePositionEncoding(dtype=dtype, name=f"{name}_positions")(x)
        return keras.layers.Dropout(config.dropout, dtype=dtype, name=f"{name}_dropout")(x)

    block_kwargs = dict(
        intermediate_dim=config.intermediate_dim,
        num_heads=config.num_heads,
        dropout=config.dropout,
        activation="relu",
        normalize_first=False,
        dtype=dtype,
    )
    encoder_token_ids = keras.Input(shape=(None,), dtype="int32", name="encoder_token_ids")
    decoder_token_ids = keras.Input(shape=(None,), dtype="int32", name="decoder_token_ids")
    encoder_padding_mask = ops.not_equal(encoder_token_ids, 0)
    decoder_padding_mask = ops.not_equal(decoder_token_ids, 0)
    target_embedding = embedding("target_embedding")

    u = embed(encoder_token_ids, embedding("source_embedding"), "source")
    for i in range(config.num_layers):
        u = keras_hub.layers.TransformerEncoder(**block_kwargs, name=f"encoder_block_{i}")(
            u, padding_mask=encoder_padding_mask
        )
    x = embed(decoder_token_ids, target_embedding, "target")
    for i in range(config.num_layers):
        x = keras_hub.layers.TransformerDecoder(**block_kwargs, name=f"decoder_block_{i}")(
            x, u, decoder_padding_mask=decoder_padding_mask, encoder_padding_mask=encoder_padding_mask
        )
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(target_embedding(x, reverse=True))
    return keras.Model(
        inputs={"encoder_token_ids": encoder_token_ids, "decoder_token_ids": decoder_token_ids},
        outputs=logits,
        name="keras_hub_transformer",
    )


BUILDERS = {"kzoo": build_kzoo, "keras-hub": build_keras_hub}


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


# === FLOPs ===


def training_flops_per_step(config):
    """Matmul FLOPs of one training step: forward (projections, QKᵀ, AV, feed-forward, output logits) times 3.

    A matmul of (m, k) by (k, n) counts 2·m·k·n FLOPs; the backward pass costs twice the forward. Embedding
    lookups, softmax, layer norms and element-wise work are not counted.
    """
    b, s, t = config.batch_size, config.source_length, config.target_length
    d, f, v = config.hidden_dim, config.intermediate_dim, config.vocabulary_size

    def attention(queries, keys):
        projections = 2 * b * (2 * queries + 2 * keys) * d * d  # W_Q and W_O on queries, W_K and W_V on keys
        scores_and_context = 2 * 2 * b * queries * keys * d  # QKᵀ and AV, all heads together
        return projections + scores_and_context

    def feed_forward(tokens):
        return 2 * 2 * b * tokens * d * f

    encoder = attention(s, s) + feed_forward(s)
    decoder = attention(t, t) + attention(t, s) + feed_forward(t)
    output_projection = 2 * b * t * d * v
    return 3 * (config.num_layers * (encoder + decoder) + output_projection)


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
