"""The published BERT sizes (google-research/bert), as functions. Each returns a freshly initialised `Bert`;
keyword overrides win. Intermediate size 4 × hidden, vocabulary 30,522, 512 positions."""

from kzoo.models.bert import Bert

SIZES = {
    "bert_tiny": dict(num_layers=2, hidden_dim=128, num_heads=2),
    "bert_mini": dict(num_layers=4, hidden_dim=256, num_heads=4),
    "bert_small": dict(num_layers=4, hidden_dim=512, num_heads=8),
    "bert_medium": dict(num_layers=8, hidden_dim=512, num_heads=8),
    "bert_base": dict(num_layers=12, hidden_dim=768, num_heads=12),
    "bert_large": dict(num_layers=24, hidden_dim=1024, num_heads=16),
}


def _preset(name):
    def build(**overrides):
        return Bert(**{**SIZES[name], "name": name, **overrides})

    size = SIZES[name]
    build.__name__ = build.__qualname__ = name
    build.__doc__ = (
        f"BERT {name.split('_')[1].capitalize()}: {size['num_layers']} layers, hidden {size['hidden_dim']}, "
        f"{size['num_heads']} heads (google-research/bert). Keyword arguments override any `Bert` argument."
    )
    return build


bert_tiny = _preset("bert_tiny")
bert_mini = _preset("bert_mini")
bert_small = _preset("bert_small")
bert_medium = _preset("bert_medium")
bert_base = _preset("bert_base")
bert_large = _preset("bert_large")
