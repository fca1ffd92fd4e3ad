"""Training helpers around Keras `fit`: strategy, fault tolerance, losses, metrics, schedules and optimizers."""

from kzoo.train.distribution import batches_for, compile_options, strategy
from kzoo.train.fault_tolerance import StopOnNaN, WorkerBackupAndRestore
from kzoo.train.losses import MaskedAccuracy, MaskedCrossEntropy
from kzoo.train.metrics import SparseF1Score
from kzoo.train.optimizers import LayerwiseAdamW, bert_layer_decay
from kzoo.train.schedules import TransformerSchedule, WarmupLinearDecay
from kzoo.train.callbacks import TimeBudget, average_weights
from kzoo.train.quality import translation_scores
