import keras
import numpy as np

from kzoo.models.weight_decay import decay_weights_only


def _looks_like_text(x):
    """Whether `x` holds strings, judged without TensorFlow (for the error of a task that has no preprocessor)."""
    if isinstance(x, tuple) and x:
        return _looks_like_text(x[0])
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, list):
        return bool(x) and isinstance(x[0], (str, bytes))
    return isinstance(x, np.ndarray) and x.dtype.kind in "USO" or "string" in str(getattr(x, "dtype", ""))


class BertTask(keras.Model):
    """The shared part of the functional models built on a `Bert` backbone: serialization, `compile` defaults, and
    raw text in `fit`, `evaluate` and `predict` through the task's `preprocessor`.

    A task model calls its `backbone` on the backbone's own inputs (plus any inputs of its own), so the backbone's
    weights are shared, not copied: fine-tuning a head trains the backbone passed in. `get_config()` nests the
    backbone's config; `compile()` fills in whatever the caller leaves as "auto" with the head's defaults, given by
    `default_loss()`, `default_metrics()` and `default_learning_rate`; `keras.saving.load_model` compiles the loaded
    model as it was saved.

    Optimizer default: AdamW with weight decay 0.01 on kernels and embeddings only (not on biases or layer-norm
    parameters), epsilon 1e-6, as in BERT's `optimization.py`.

    Raw text, keras-hub's Task convention: a task made with `from_checkpoint` (or given `preprocessor=`) holds its
    `kzoo.text.BertPreprocessor` as `task.preprocessor`, saved and loaded with it. `fit`, `evaluate` and `predict`
    then also take strings, pairs of strings as a tuple `(texts, second_texts)`, and batched `tf.data` datasets of
    them (`kzoo.text.task_inputs` says how); the text becomes features inside the `tf.data` pipeline, `batch_size`
    texts at a time (32 by default), shuffled every epoch by `fit` unless `shuffle=False`. Token-id features work as
    for any Keras model, with or without a preprocessor.

    Example:
    ```python
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "fine", "dull", "film"]
    preprocessor = kzoo.text.BertPreprocessor(vocabulary, sequence_length=8)
    backbone = kzoo.models.Bert(vocabulary_size=9, num_layers=1, hidden_dim=8, num_heads=2, max_sequence_length=8)
    classifier = kzoo.models.BertClassifier(backbone, 2, preprocessor=preprocessor, label_names=["neg", "pos"])
    classifier.compile()
    classifier.fit(["a fine film", "a dull film"], [1, 0], epochs=1, verbose=0)
    classifier.predict_labels(["a fine film"])  # ["pos"] or ["neg"]: a model this small learns nothing
    ```
    """

    default_learning_rate = 5e-5
    trims_padding = False  # whether text batches may be cut to their longest example (outputs per text, not token)

    def attach_preprocessor(self, preprocessor):
        """Set `preprocessor` as the task's text front door, after checking that its rows fit the backbone."""
        if preprocessor is not None:
            from kzoo.models.bert_pretrained import check_fits

            check_fits(self.backbone, preprocessor)
        self.preprocessor = preprocessor

    @classmethod
    def from_checkpoint(cls, source, sequence_length=128, **arguments):
        """The task on a pretrained backbone, with the preprocessor that tokenizes for it attached.

        `source` is a public checkpoint (Hugging Face or Google folder, or release name), a run folder of kzoo's
        pretraining recipe, or a preset name with `vocabulary=` (see `kzoo.models.bert_pretrained.pretrained_bert`).
        `arguments` are the task's own (`num_classes=`, `label_names=`, `pooling=`, `dropout=`, ...) and, for a
        preset, `vocabulary=` and `lowercase=`. The backbone's dropout is the task's `dropout=` when given.
        """
        from kzoo.models.bert_pretrained import pretrained_bert

        sources = {name: arguments.pop(name) for name in ("vocabulary", "lowercase") if name in arguments}
        overrides = {"dropout": arguments["dropout"]} if arguments.get("dropout") is not None else {}
        backbone, preprocessor = pretrained_bert(source, sequence_length, **sources, **overrides)
        task = cls(backbone, preprocessor=preprocessor, **arguments)
        if getattr(task, "pooling", None) != "pooled":
            backbone.pooler.trainable = False  # this backbone is the task's own, and its [CLS] pooler goes unread
        return task

    def _text_batches(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False):
        """`x` (with `y` and `sample_weight`) as a dataset of feature batches when it is text, else None."""
        if getattr(self, "preprocessor", None) is None:
            if _looks_like_text(x):
                raise ValueError(
                    f"{type(self).__name__} {self.name!r} has no preprocessor, so it takes token ids, not text. Make "
                    f"it with {type(self).__name__}.from_checkpoint(...), or pass preprocessor= (a "
                    "kzoo.text.BertPreprocessor)."
                )
            return None
        from kzoo.text.task_inputs import text_dataset

        return text_dataset(self.preprocessor, x, y, sample_weight, batch_size, shuffle, self.trims_padding)

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None, validation_data=None, validation_batch_size=None,
            **kwargs):
        batches = self._text_batches(x, y, sample_weight, batch_size, kwargs.get("shuffle", True))
        if batches is not None:
            if kwargs.get("validation_split"):
                raise ValueError("validation_split does not apply to text: pass validation_data=(texts, labels).")
            x, y, sample_weight, batch_size = batches, None, None, None
            kwargs["shuffle"] = False  # shuffled in the pipeline
        if isinstance(validation_data, (tuple, list)):
            valid_x, valid_y, valid_weight = keras.utils.unpack_x_y_sample_weight(tuple(validation_data))
            valid = self._text_batches(valid_x, valid_y, valid_weight, validation_batch_size or batch_size or None)
            if valid is not None:
                validation_data, validation_batch_size = valid, None
        elif validation_data is not None:
            validation_data = self._text_batches(validation_data) or validation_data
        return super().fit(x, y, batch_size=batch_size, sample_weight=sample_weight, validation_data=validation_data,
                           validation_batch_size=validation_batch_size, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        batches = self._text_batches(x, y, sample_weight, batch_size)
        if batches is not None:
            x, y, sample_weight, batch_size = batches, None, None, None
        return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        batches = self._text_batches(x, batch_size=batch_size)
        if batches is not None:
            x, batch_size = batches, None
        return super().predict(x, batch_size=batch_size, **kwargs)

    def dense_head(self, backbone, units, dropout, name):
        """Dropout, then a dense layer with BERT's initializer, giving float32 logits. The layers become the
        attributes `output_dropout`, `output_dense` and `logits_cast`; returns the function that applies them."""
        self.output_dropout = keras.layers.Dropout(dropout, dtype=backbone.dtype_policy, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            units,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=backbone.initializer_range),
            dtype=backbone.dtype_policy,
            name=name,
        )
        self.logits_cast = keras.layers.Activation("linear", dtype="float32", name=f"{name}_float32")
        return lambda x: self.logits_cast(self.output_dense(self.output_dropout(x)))

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        if optimizer == "auto":
            optimizer = keras.optimizers.AdamW(self.default_learning_rate, weight_decay=0.01, epsilon=1e-6)
        if isinstance(optimizer, keras.optimizers.AdamW):
            decay_weights_only(optimizer)
        if loss == "auto":
            loss = self.default_loss()
        if metrics == "auto":
            metrics = self.default_metrics()
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def compile_from_config(self, config):
        # Keras skips compiling a loaded model whose class overrides `compile`; this one only fills in defaults, and
        # the saved arguments are already filled in, so a loaded classifier comes back compiled, optimizer included.
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)  # its slots exist before the saved state is read in

    def head_config(self):
        return {}

    def get_config(self):
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            **self.head_config(),
        }
        if getattr(self, "preprocessor", None) is not None:
            config["preprocessor"] = keras.saving.serialize_keras_object(self.preprocessor)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        if config.get("preprocessor") is not None:
            import kzoo.text.bert_preprocessor  # noqa: F401 (registers kzoo>BertPreprocessor, which `import kzoo` defers)

            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(**config)
