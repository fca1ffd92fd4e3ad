"""Training helpers around Keras `fit`: strategy, fault tolerance, losses, metrics, schedules and optimizers."""

from kzoo._lazy import lazy_namespace

__getattr__, __dir__ = lazy_namespace(__name__, {
    "batches_for": "kzoo.train.distribution",
    "compile_options": "kzoo.train.distribution",
    "strategy": "kzoo.train.distribution",
    "StopOnNaN": "kzoo.train.fault_tolerance",
    "WorkerBackupAndRestore": "kzoo.train.fault_tolerance",
    "MaskedCrossEntropy": "kzoo.train.losses",
    "LayerwiseAdamW": "kzoo.train.optimizers",
    "bert_layer_decay": "kzoo.train.optimizers",
    "TransformerSchedule": "kzoo.train.schedules",
    "WarmupLinearDecay": "kzoo.train.schedules",
    "TimeBudget": "kzoo.train.callbacks",
    "StopAtStep": "kzoo.train.callbacks",
    "LinearDecayToBudget": "kzoo.train.callbacks",
    "StepLoss": "kzoo.train.callbacks",
    "MovingAverage": "kzoo.train.callbacks",
    "Run": "kzoo.train.run",
    "average_weights": "kzoo.train.callbacks",
    "translation_scores": "kzoo.train.quality",
})
