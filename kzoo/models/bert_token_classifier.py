import keras

from kzoo.metrics import MaskedAccuracy
from kzoo.models.bert_task import BertTask


@keras.saving.register_keras_serializable(package="kzoo")
class BertTokenClassifier(BertTask):
    """Token classification (tagging, e.g. named entities) on a `Bert` backbone: a dense layer on every position.

    Label positions that should not count (padding, [CLS], [SEP], the continuation pieces of a word) with
    `ignore_label` (default -100, the Hugging Face convention): `compile()`'s default loss and accuracy skip them.
    Defaults: sparse cross-entropy from logits averaged over counted positions, token accuracy, AdamW at 5e-5.

    Args:
        backbone: `kzoo.models.Bert`. Its weights are shared, not copied.
        num_classes: int. Number of tags.
        dropout: float. Dropout before the dense layer. Defaults to the backbone's dropout.
        ignore_label: int. The label of positions that do not count. Defaults to -100.
        **kwargs: `keras.Model` arguments such as `name`.

    Inputs:
        The backbone's `token_ids`, `segment_ids`, `padding_mask`.

    Outputs:
        float32 logits (batch, seq, num_classes).

    Example:
    ```python
    tagger = kzoo.models.BertTokenClassifier(kzoo.bert_tiny(), num_classes=9)
    tagger.compile()
    ```

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805), section 5.3.
    """

    def __init__(self, backbone, num_classes, dropout=None, ignore_label=-100, **kwargs):
        if int(num_classes) < 2:
            raise ValueError(f"num_classes={num_classes} must be at least 2.")
        if 0 <= ignore_label < num_classes:
            raise ValueError(
                f"ignore_label={ignore_label} is a real class id (0..{num_classes - 1}); use a negative value such "
                "as -100."
            )
        dropout = backbone.dropout if dropout is None else dropout
        self.backbone = backbone
        head = self.dense_head(backbone, num_classes, dropout, name="logits")

        inputs = dict(backbone.input)
        sequence = backbone(inputs)["sequence_output"]
        logits = head(sequence)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.num_classes = int(num_classes)
        self.dropout = dropout
        self.ignore_label = ignore_label

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=self.ignore_label, reduction="mean_with_sample_weight"
        )

    def default_metrics(self):
        return [MaskedAccuracy(pad_id=self.ignore_label, name="accuracy")]

    def head_config(self):
        return {"num_classes": self.num_classes, "dropout": self.dropout, "ignore_label": self.ignore_label}
