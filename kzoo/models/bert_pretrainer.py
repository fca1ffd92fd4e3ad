import keras

from kzoo.checkpoints.bert_checkpoint import load_checkpoint_weights, read_checkpoint
from kzoo.layers.masked_lm_head import MaskedLMHead
from kzoo.metrics import MaskedAccuracy
from kzoo.models.bert import Bert
from kzoo.models.bert_task import BertTask


@keras.saving.register_keras_serializable(package="kzoo")
class BertPretrainer(BertTask):
    """BERT pretraining: a masked-language-model head and a next-sentence head on one `Bert` backbone.

    The masked-LM head (dense, GELU, layer norm, then the token-embedding matrix transposed plus a bias) runs only
    at `masked_positions`. The next-sentence head is a 2-way dense layer on the pooled [CLS] vector; class 0 means
    "B is the true next segment" (IsNext) and class 1 "B is random" (NotNext), as in Google's and Hugging Face's
    checkpoints. `compile()` defaults: loss = masked-LM cross-entropy averaged over the real masked slots + next-
    sentence cross-entropy (the two summed, as in the paper); metrics `mlm_accuracy` and `nsp_accuracy`; AdamW at
    1e-4 with weight decay 0.01. Labels of unused masked slots must be 0 ([PAD]): loss and accuracy skip them.

    Args:
        backbone: `kzoo.models.Bert`. Its weights are shared, not copied.
        activation: activation of the masked-LM transform. Defaults to the backbone's activation.
        **kwargs: `keras.Model` arguments such as `name`.

    Inputs:
        The backbone's `token_ids`, `segment_ids`, `padding_mask`, and `masked_positions` int (batch, predictions).

    Outputs:
        A dict: `mlm` float32 logits (batch, predictions, vocabulary) and `nsp` float32 logits (batch, 2).
        Train with `y = {"mlm": masked_ids, "nsp": next_sentence_labels}` and optionally
        `sample_weight = {"mlm": masked_weights, "nsp": ones}`: see `kzoo.text.pretraining_dataset`.

    Example:
    ```python
    documents = [["The cat sat on the mat.", "It purred."], ["Dogs bark at night.", "The moon rose."]] * 4
    preprocessor = kzoo.text.BertPreprocessor(kzoo.data.shipped_file("wikitext2/vocab.txt"), sequence_length=16)
    dataset = kzoo.text.pretraining_dataset(lambda: documents, preprocessor, batch_size=4, max_predictions=3)
    pretrainer = kzoo.models.BertPretrainer(kzoo.bert_tiny(vocabulary_size=preprocessor.vocabulary_size()))
    features, labels, sample_weights = next(iter(dataset))
    outputs = pretrainer(features)
    tuple(outputs["mlm"].shape), tuple(outputs["nsp"].shape)  # ((4, 3, 8192), (4, 2))
    ```

    Then `pretrainer.compile()` and `pretrainer.fit(dataset, epochs=...)` train it (`kzoo.train.bert_pretraining_recipe`
    is the whole run); `BertPretrainer.from_checkpoint("uncased_L-4_H-512_A-8")` starts from a Google release instead,
    with its heads.

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805), section 3.1.
    """

    default_learning_rate = 1e-4

    def __init__(self, backbone, activation=None, **kwargs):
        activation = activation or backbone.activation
        initializer = keras.initializers.TruncatedNormal(stddev=backbone.initializer_range)
        self.backbone = backbone
        self.masked_lm_head = MaskedLMHead(
            backbone.vocabulary_size,
            token_embedding=backbone.token_embedding,
            activation=activation,
            layer_norm_epsilon=backbone.layer_norm_epsilon,
            kernel_initializer=initializer,
            dtype=backbone.dtype_policy,
            name="mlm_head",
        )
        self.next_sentence_head = keras.layers.Dense(
            2, kernel_initializer=initializer, dtype=backbone.dtype_policy, name="nsp_head"
        )
        self.nsp_logits = keras.layers.Activation("linear", dtype="float32", name="nsp_logits")

        inputs = dict(backbone.input)
        inputs["masked_positions"] = keras.Input(shape=(None,), dtype="int32", name="masked_positions")
        outputs = backbone({name: inputs[name] for name in backbone.input})
        mlm = self.masked_lm_head(outputs["sequence_output"], masked_positions=inputs["masked_positions"])
        nsp = self.nsp_logits(self.next_sentence_head(outputs["pooled_output"]))
        super().__init__(inputs=inputs, outputs={"mlm": mlm, "nsp": nsp}, **kwargs)
        self.activation = activation

    def default_loss(self):
        return {
            "mlm": keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, ignore_class=0, reduction="mean_with_sample_weight", name="mlm_loss"
            ),
            "nsp": keras.losses.SparseCategoricalCrossentropy(from_logits=True, name="nsp_loss"),
        }

    def default_metrics(self):
        return {
            "mlm": [MaskedAccuracy(pad_id=0, name="accuracy")],
            "nsp": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        }

    def head_config(self):
        return {"activation": self.activation}

    @classmethod
    def from_checkpoint(cls, path, **overrides):
        """A `BertPretrainer` with the encoder and both pretraining heads of a BERT checkpoint.

        The checkpoint must hold the heads: Google's releases and Hugging Face `BertForPreTraining` folders do
        (`cls/predictions/*`, `cls/seq_relationship/*`); encoder-only ones such as all-MiniLM-L6-v2 do not, and
        the error says so. `path` and `overrides` are as for `Bert.from_checkpoint`; `overrides` go to the backbone.
        """
        checkpoint = read_checkpoint(path)
        pretrainer = cls(Bert(**checkpoint.bert_arguments(**overrides)))
        load_checkpoint_weights(pretrainer, checkpoint)
        return pretrainer
