import keras
import numpy as np

from kzoo.metrics import MaskedAccuracy
from kzoo.models.bert_task import BertTask


@keras.saving.register_keras_serializable(package="kzoo")
class BertTokenClassifier(BertTask):
    """Token classification (tagging, e.g. named entities) on a `Bert` backbone: a dense layer on every position.

    Label positions that should not count (padding, [CLS], [SEP], the continuation pieces of a word) with
    `ignore_label` (default -100, the Hugging Face convention): `compile()`'s default loss and accuracy skip them.
    Defaults: sparse cross-entropy from logits averaged over counted positions, token accuracy, AdamW at 5e-5.

    Made with `from_checkpoint(source, num_classes=..., label_names=...)`, the tagger takes raw text: `fit(texts,
    word_labels)` with one label id per word (words as BERT's basic tokenizer cuts them: punctuation is a word of
    its own), the first piece of each word carrying its label; `predict_labels(texts)` gives (word, label name)
    pairs per text.

    Args:
        backbone: `kzoo.models.Bert`. Its weights are shared, not copied.
        num_classes: int. Number of tags.
        dropout: float. Dropout before the dense layer. Defaults to the backbone's dropout.
        ignore_label: int. The label of positions that do not count. Defaults to -100.
        label_names: list of str, one per class in class-id order, or None. What `predict_labels` returns.
        preprocessor: `kzoo.text.BertPreprocessor` or None. Makes the tagger take raw text.
        **kwargs: `keras.Model` arguments such as `name`.

    Inputs:
        The backbone's `token_ids`, `segment_ids`, `padding_mask`.

    Outputs:
        float32 logits (batch, seq, num_classes).

    Example:
    ```python
    tagger = kzoo.models.BertTokenClassifier.from_checkpoint(
        "bert_tiny", vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ada", "lives", "in", "paris", "."],
        sequence_length=16, num_classes=2, label_names=["O", "NAME"])
    tagger.compile()
    tagger.fit(["Ada lives in Paris."], [[1, 0, 0, 1, 0]], epochs=1, verbose=0)
    tagger.predict_labels("Ada lives in Paris.")  # [("ada", ...), ("lives", ...), ("in", ...), ("paris", ...), ...]
    ```

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805), section 5.3.
    """

    def __init__(self, backbone, num_classes, dropout=None, ignore_label=-100, label_names=None, preprocessor=None,
                 **kwargs):
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
        if label_names is not None and len(label_names) != self.num_classes:
            raise ValueError(f"label_names={list(label_names)} has {len(label_names)} names for num_classes="
                             f"{num_classes}: give one name per class, in class-id order.")
        self.label_names = None if label_names is None else [str(name) for name in label_names]
        self.attach_preprocessor(preprocessor)

    def _text_batches(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False):
        if y is not None and getattr(self, "preprocessor", None) is not None and sample_weight is None:
            from kzoo.text.task_inputs import is_text, word_label_dataset

            if is_text(x) and not isinstance(x, tuple):
                return word_label_dataset(self.preprocessor, x, y, self.ignore_label, batch_size, shuffle)
        return super()._text_batches(x, y, sample_weight, batch_size, shuffle)

    def predict_labels(self, texts, batch_size=None):
        """The (word, label name) pairs of each text, words as BERT's basic tokenizer cuts them, each labelled by
        its first piece; words cut off by the preprocessor's `sequence_length` are left out. A single string gives
        a single list."""
        from kzoo.text.task_inputs import word_positions

        if self.label_names is None or getattr(self, "preprocessor", None) is None:
            raise ValueError(f"{self.name} needs label_names and a preprocessor to name the labels of words: make it "
                             "with BertTokenClassifier.from_checkpoint(..., label_names=...).")
        batch = [texts] if isinstance(texts, str) else list(texts)
        predicted = np.argmax(self.predict(batch, batch_size=batch_size, verbose=0), axis=-1)  # (batch, seq)
        labelled = [[(word, self.label_names[predicted[row, position]]) for word, position in words]
                    for row, words in enumerate(word_positions(self.preprocessor, batch))]
        return labelled[0] if isinstance(texts, str) else labelled

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=self.ignore_label, reduction="mean_with_sample_weight"
        )

    def default_metrics(self):
        return [MaskedAccuracy(pad_id=self.ignore_label, name="accuracy")]

    def head_config(self):
        return {"num_classes": self.num_classes, "dropout": self.dropout, "ignore_label": self.ignore_label,
                "label_names": self.label_names}
