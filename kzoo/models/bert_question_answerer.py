import keras
import numpy as np
from keras import ops

from kzoo.layers.masks import MASKED_LOGIT
from kzoo.models.bert_task import BertTask


@keras.saving.register_keras_serializable(package="kzoo")
class BertQuestionAnswerer(BertTask):
    """Extractive question answering (SQuAD-style) on a `Bert` backbone: start and end logits for every position.

    The question and the context are packed as `[CLS] question [SEP] context [SEP]`; a dense layer with two units
    scores every position as the answer's first and last token. Padding positions get the logit
    `kzoo.layers.masks.MASKED_LOGIT` so that they are never chosen. `best_spans()` turns the logits into the
    highest-scoring (start, end) with start <= end < start + max_answer_length. `compile()` defaults: a sparse
    cross-entropy from logits on each of `start` and `end` (their mean is the paper's loss up to a factor 2),
    accuracy on each, AdamW at 5e-5.

    Args:
        backbone: `kzoo.models.Bert`. Its weights are shared, not copied.
        dropout: float. Dropout before the dense layer. Defaults to the backbone's dropout.
        preprocessor: `kzoo.text.BertPreprocessor` or None. Makes the reader take raw text: `predict` takes
            `(questions, contexts)`, and `predict_answers(questions, contexts)` gives the answer strings.
        **kwargs: `keras.Model` arguments such as `name`.

    Inputs:
        The backbone's `token_ids`, `segment_ids`, `padding_mask`.

    Outputs:
        A dict of float32 logits: `start` (batch, seq) and `end` (batch, seq). Train with
        `y = {"start": start_positions, "end": end_positions}`.

    Example:
    ```python
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "where", "does", "ada", "live", "in", "paris", "?", "."]
    reader = kzoo.models.BertQuestionAnswerer.from_checkpoint("bert_tiny", vocabulary=vocabulary, sequence_length=16)
    reader.predict_answers("Where does Ada live?", "Ada lives in Paris.")  # a span of the context; trained: "paris"
    ```

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805), section 4.2.
    """

    def __init__(self, backbone, dropout=None, preprocessor=None, **kwargs):
        dropout = backbone.dropout if dropout is None else dropout
        self.backbone = backbone
        head = self.dense_head(backbone, 2, dropout, name="span_logits")
        inputs = dict(backbone.input)
        sequence = backbone(inputs)["sequence_output"]
        logits = head(sequence)  # (batch, seq, 2)
        padding_bias = (1.0 - ops.cast(inputs["padding_mask"], "float32")) * MASKED_LOGIT  # (batch, seq)
        start = keras.layers.Identity(dtype="float32", name="start")(logits[..., 0] + padding_bias)
        end = keras.layers.Identity(dtype="float32", name="end")(logits[..., 1] + padding_bias)
        super().__init__(inputs=inputs, outputs={"start": start, "end": end}, **kwargs)
        self.dropout = dropout
        self.attach_preprocessor(preprocessor)

    def predict_answers(self, questions, contexts, max_answer_length=30, batch_size=None):
        """The answer to each question in its context: the best span of context tokens (`best_spans`, over the
        context only, never the question or a special token), as text. The text is the tokenized one (lowercased for
        an uncased vocabulary, pieces joined), as `BertPreprocessor.detokenize` gives it. A single question gives a
        single string."""
        if getattr(self, "preprocessor", None) is None:
            raise ValueError(f"{self.name} has no preprocessor: make it with BertQuestionAnswerer.from_checkpoint(...) "
                             "to answer questions given as text.")
        single = isinstance(questions, str)
        questions, contexts = ([questions], [contexts]) if single else (list(questions), list(contexts))
        logits = self.predict((questions, contexts), batch_size=batch_size, verbose=0)
        features = self.preprocessor(questions, contexts)
        token_ids = features["token_ids"].numpy()
        sep = self.preprocessor.token_to_id(self.preprocessor.sep_token)
        context = (features["segment_ids"].numpy() == 1) & (token_ids != sep)  # (batch, seq)
        starts, ends = self.best_spans(*(np.where(context, logits[name], MASKED_LOGIT) for name in ("start", "end")),
                                       max_answer_length=max_answer_length)
        spans = [token_ids[row, start:end + 1] for row, (start, end) in enumerate(zip(np.asarray(starts),
                                                                                       np.asarray(ends)))]
        answers = [self.preprocessor.detokenize([span]).numpy()[0].decode("utf-8") for span in spans]
        return answers[0] if single else answers

    @staticmethod
    def best_spans(start_logits, end_logits, max_answer_length=30):
        """The (start, end) int32 positions (batch,) maximizing start + end logits over valid spans."""
        length = ops.shape(start_logits)[1]
        scores = ops.expand_dims(start_logits, 2) + ops.expand_dims(end_logits, 1)  # (batch, start, end)
        offsets = ops.arange(length)[None, :] - ops.arange(length)[:, None]  # end - start
        valid = ops.logical_and(offsets >= 0, offsets < max_answer_length)
        scores = ops.where(valid[None], scores, ops.full_like(scores, MASKED_LOGIT))
        best = ops.cast(ops.argmax(ops.reshape(scores, (ops.shape(scores)[0], -1)), axis=-1), "int32")
        return best // length, best % length

    def default_loss(self):
        return {
            "start": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "end": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        }

    def default_metrics(self):
        return {
            "start": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            "end": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        }

    def head_config(self):
        return {"dropout": self.dropout}
