"""What a BERT model attends to in one text: its tokens and every block's attention weights over them, for drawing."""

import numpy as np

from kzoo.models.bert import Bert


def attention_map(model, text, second_text=None, preprocessor=None):
    """The tokens of `text` (or of the pair `text`, `second_text`) as `model` reads them, and the self-attention
    weights of every encoder block over them.

    `model` is a `Bert` or a task on one (`BertClassifier`, ...: its `backbone` is used, so a fine-tuned classifier
    shows its fine-tuned weights). The text is tokenized by `preprocessor`, by default the task's own
    (`task.preprocessor`, which `from_checkpoint` and the recipes attach).

    Returns:
        `(tokens, weights)`: `tokens` the list of the n real tokens, `[CLS]` and `[SEP]` included (padding
        dropped), and `weights` a float32 numpy array (num_layers, num_heads, n, n), first block first: row i of a
        head is token i's attention over the n tokens, summing to 1 (the weights of `Bert.attention_weights`, at
        inference). `weights[-1].mean(0)` is the last block's mean over heads.

    Example:
    ```python
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "fine", "film"]
    preprocessor = kzoo.text.BertPreprocessor(vocabulary, sequence_length=8)
    backbone = kzoo.models.Bert(vocabulary_size=8, num_layers=2, hidden_dim=8, num_heads=2, max_sequence_length=8)
    classifier = kzoo.models.BertClassifier(backbone, 2, preprocessor=preprocessor)
    tokens, weights = kzoo.models.attention_map(classifier, "a fine film")
    tokens  # ["[CLS]", "a", "fine", "film", "[SEP]"]
    weights.shape  # (2, 2, 5, 5): layers, heads, from token, to token
    ```
    """
    backbone = model if isinstance(model, Bert) else getattr(model, "backbone", None)
    if not isinstance(backbone, Bert):
        raise TypeError(f"model is a {type(model).__name__}; pass a kzoo.models.Bert or a task built on one "
                        "(BertClassifier, BertTokenClassifier, ...).")
    preprocessor = preprocessor if preprocessor is not None else getattr(model, "preprocessor", None)
    if preprocessor is None:
        raise ValueError(f"{type(model).__name__} {model.name!r} has no preprocessor to tokenize the text with: pass "
                         "preprocessor= (a kzoo.text.BertPreprocessor), or make the task with from_checkpoint(...).")
    if not isinstance(text, str) or not (second_text is None or isinstance(second_text, str)):
        raise TypeError(f"text={text!r} and second_text={second_text!r}: pass one string (and optionally a second "
                        "one, for a pair); attention_map draws one example.")
    features = preprocessor([text], None if second_text is None else [second_text])
    features = {name: np.asarray(value) for name, value in features.items()}
    length = int(features["padding_mask"][0].sum())
    weights = np.stack([np.asarray(w)[0] for w in backbone.attention_weights(features)])  # (layers, heads, seq, seq)
    tokens = [preprocessor.id_to_token(i) for i in features["token_ids"][0, :length]]
    return tokens, weights[:, :, :length, :length]
