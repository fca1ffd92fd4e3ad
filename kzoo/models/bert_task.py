import keras


class BertTask(keras.Model):
    """The shared part of the functional models built on a `Bert` backbone: serialization and `compile` defaults.

    A task model calls its `backbone` on the backbone's own inputs (plus any inputs of its own), so the backbone's
    weights are shared, not copied: fine-tuning a head trains the backbone passed in. `get_config()` nests the
    backbone's config; `compile()` fills in whatever the caller leaves as "auto" with the head's defaults, given by
    `default_loss()`, `default_metrics()` and `default_learning_rate`; `keras.saving.load_model` compiles the loaded
    model as it was saved.

    Optimizer default: AdamW with weight decay 0.01 on kernels and embeddings only (not on biases or layer-norm
    parameters), epsilon 1e-6, as in BERT's `optimization.py`.
    """

    default_learning_rate = 5e-5

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
            optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
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
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            **self.head_config(),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return cls(**config)
