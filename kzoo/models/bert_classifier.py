import keras

from kzoo.layers.mean_pooling import MeanPooling
from kzoo.models.bert_task import BertTask

POOLINGS = ("pooled", "mean")


@keras.saving.register_keras_serializable(package="kzoo")
class BertClassifier(BertTask):
    """Sequence classification on a `Bert` backbone: dropout and a dense layer on the pooled [CLS] vector (BERT's
    head), or on the mean of the last layer over the real tokens (`pooling="mean"`).

    The mean suits checkpoints trained as sentence encoders with mean pooling, such as sentence-transformers'
    all-MiniLM-L6-v2, whose [CLS] pooler was never trained for sentence meaning.

    One model serves single sentences and sentence pairs: a pair is packed as `[CLS] A [SEP] B [SEP]` with segment
    ids 0 for A and 1 for B (see `kzoo.text.classification_dataset`). `compile()` defaults: sparse cross-entropy
    from logits, accuracy, AdamW at 5e-5 with weight decay 0.01.

    Args:
        backbone: `kzoo.models.Bert`. Its weights are shared, not copied.
        num_classes: int. Number of labels.
        dropout: float. Dropout on the pooled vector. Defaults to the backbone's dropout.
        pooling: "pooled" (the tanh pooler on [CLS], the default) or "mean" (`kzoo.layers.MeanPooling` of the
            sequence output over `padding_mask`).
        **kwargs: `keras.Model` arguments such as `name`.

    Inputs:
        The backbone's `token_ids`, `segment_ids`, `padding_mask`.

    Outputs:
        float32 logits (batch, num_classes).

    Example:
    ```python
    classifier = kzoo.models.BertClassifier(kzoo.bert_tiny(), num_classes=2)
    classifier.compile()
    classifier.fit(kzoo.text.classification_dataset(texts, labels, tokenizer, 128, 32), epochs=3)
    ```

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805), section 4.1.
    """

    def __init__(self, backbone, num_classes, dropout=None, pooling="pooled", **kwargs):
        if int(num_classes) < 2:
            raise ValueError(f"num_classes={num_classes} must be at least 2; use 2 for binary tasks.")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r} is not a pooling; use one of {POOLINGS}.")
        dropout = backbone.dropout if dropout is None else dropout
        self.backbone = backbone
        head = self.dense_head(backbone, num_classes, dropout, name="logits")

        inputs = dict(backbone.input)
        outputs = backbone(inputs)
        if pooling == "mean":
            self.mean_pooling = MeanPooling(dtype=backbone.dtype_policy, name="mean_pooling")
            pooled = self.mean_pooling(outputs["sequence_output"], inputs["padding_mask"])
        else:
            pooled = outputs["pooled_output"]
        logits = head(pooled)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.num_classes = int(num_classes)
        self.dropout = dropout
        self.pooling = pooling

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def head_config(self):
        return {"num_classes": self.num_classes, "dropout": self.dropout, "pooling": self.pooling}
