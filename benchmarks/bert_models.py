"""BERT masked-LM pretraining contenders on one configuration, without TensorFlow: kzoo's `BertPretrainer` on a kzoo
preset, the same model cut at its masked-LM output, and keras-hub's `BertMaskedLM`, with the optimizer they share and
the analytic matmul FLOPs of a training step. benchmarks/bench_bert.py (TensorFlow) and benchmarks/gpu_jax.py (JAX)
time them.
"""

from dataclasses import dataclass

import keras
import keras_hub

import kzoo
from kzoo.models.weight_decay import decay_weights_only


@dataclass(frozen=True)
class Config:
    vocabulary_size: int = 30522
    num_layers: int = 4
    hidden_dim: int = 512
    num_heads: int = 8
    intermediate_dim: int = 2048
    max_sequence_length: int = 512
    dropout: float = 0.1
    batch_size: int = 32
    sequence_length: int = 128
    masked_positions: int = 20  # BERT's max_predictions_per_seq for 128-token sequences
    learning_rate: float = 1e-4

    @property
    def tokens_per_step(self):
        """Tokens in one training batch (all of them go through the encoder)."""
        return self.batch_size * self.sequence_length



def optimizer(config):
    """The optimizer of every contender: AdamW with BERT's settings, no weight decay on biases and layer norms."""
    return decay_weights_only(keras.optimizers.AdamW(config.learning_rate, weight_decay=0.01, epsilon=1e-6))


def kzoo_pretrainer(config, precision, preset="bert_small", **overrides):
    """`BertPretrainer` on `kzoo.<preset>(**overrides)`; refused unless the backbone built has `config`'s sizes."""
    backbone = getattr(kzoo, preset)(vocabulary_size=config.vocabulary_size, dropout=config.dropout, dtype=precision,
                                     **overrides)
    built = {key: getattr(backbone, key) for key in ("num_layers", "hidden_dim", "num_heads", "intermediate_dim",
                                                       "max_sequence_length", "dropout")}
    expected = {key: getattr(config, key) for key in built}
    if built != expected:
        raise ValueError(f"kzoo.{preset} built {built}, but this benchmark's Config is {expected}: make them agree.")
    return kzoo.models.BertPretrainer(backbone)


def build_kzoo(config, precision, preset="bert_small", **overrides):
    """`BertPretrainer` with its default losses (masked-LM + next-sentence) and metrics."""
    model = kzoo_pretrainer(config, precision, preset, **overrides)
    model.compile(optimizer=optimizer(config), jit_compile=False)
    return model


def build_kzoo_mlm_only(config, precision):
    """The `BertPretrainer`'s inputs to its masked-LM output only, with the pretrainer's masked-LM loss and metric."""
    pretrainer = kzoo_pretrainer(config, precision)
    model = keras.Model(pretrainer.input, pretrainer.output["mlm"], name="kzoo_mlm_only")
    model.backbone = pretrainer.backbone
    model.compile(
        optimizer=optimizer(config),
        loss=pretrainer.default_loss()["mlm"],
        metrics=pretrainer.default_metrics()["mlm"],
        jit_compile=False,
    )
    return model


def build_keras_hub(config, precision):
    """keras-hub's `BertMaskedLM` with its default loss and weighted metric."""
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocabulary_size,
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        hidden_dim=config.hidden_dim,
        intermediate_dim=config.intermediate_dim,
        dropout=config.dropout,
        max_sequence_length=config.max_sequence_length,
        dtype=precision,
    )
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(optimizer=optimizer(config), jit_compile=False)
    return model


BUILDERS = {"kzoo": build_kzoo, "kzoo (MLM only)": build_kzoo_mlm_only, "keras-hub": build_keras_hub}


def backbone_flops(config, batch_size):
    """Forward matmul FLOPs of the encoder on `batch_size` sequences: per block the Q, K, V and O projections,
    QKᵀ and AV (all heads together) and the feed-forward layer; then the pooler on [CLS]. A matmul of (m, k) by
    (k, n) counts 2·m·k·n; embedding lookups, softmax, layer norms and element-wise work are not counted."""
    b, s, d, f = batch_size, config.sequence_length, config.hidden_dim, config.intermediate_dim
    block = 2 * b * s * 4 * d * d + 2 * 2 * b * s * s * d + 2 * 2 * b * s * d * f
    pooler = 2 * b * d * d
    return config.num_layers * block + pooler


def training_flops_per_step(config):
    """Matmul FLOPs of one pretraining step: the encoder, plus the masked-LM transform and tied vocabulary projection
    at the masked positions only, times 3 for forward and backward. The next-sentence head (2·b·d·2) is left out."""
    b, p, d, v = config.batch_size, config.masked_positions, config.hidden_dim, config.vocabulary_size
    masked_lm = 2 * b * p * d * d + 2 * b * p * d * v
    return 3 * (backbone_flops(config, b) + masked_lm)


