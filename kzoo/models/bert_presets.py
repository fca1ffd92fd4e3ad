"""The published BERT sizes (google-research/bert), as functions. Each returns a `Bert`, freshly initialised or,
with `weights=`, loaded from a checkpoint of that size; keyword overrides win. Intermediate size 4 × hidden,
vocabulary 30,522, 512 positions (a checkpoint's own vocabulary and sizes come with it)."""

from kzoo.checkpoints import bert_releases
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
    def build(weights=None, **overrides):
        arguments = {**SIZES[name], "name": name, **overrides}
        if weights is None:
            return Bert(**arguments)
        release = bert_releases.find_release(weights)
        if release is not None and release.sizes != SIZES[name]:  # checked before downloading
            raise ValueError(
                f"{name} is {SIZES[name]}, but the release {weights!r} is {release.sizes}. Use the preset of that "
                f"size, or kzoo.models.Bert.from_checkpoint({weights!r})."
            )
        return Bert.from_checkpoint(weights, **arguments)

    size = SIZES[name]
    build.__name__ = build.__qualname__ = name
    build.__doc__ = (
        f"BERT {name.split('_')[1].capitalize()}: {size['num_layers']} layers, hidden {size['hidden_dim']}, "
        f"{size['num_heads']} heads (google-research/bert). `weights`: a checkpoint folder, or the name of a Google "
        f"release of this size such as "
        f"\"uncased_L-{size['num_layers']}_H-{size['hidden_dim']}_A-{size['num_heads']}\", "
        "loaded with `Bert.from_checkpoint`. Keyword arguments override any `Bert` argument.\n\n"
        + _example(name, size)
    )
    return build


def _example(name, size):
    """The docstring example of a preset: built with a small vocabulary, and at most 4 layers, to stay quick."""
    layers = "" if size["num_layers"] <= 4 else (
        f"# {size['num_layers']} layers in the release; 2 here keep the example small\n"
    )
    depth = "" if not layers else ", num_layers=2"
    return (
        "Example:\n```python\n"
        f"{layers}backbone = kzoo.models.{name}(vocabulary_size=1000, max_sequence_length=16{depth})\n"
        'outputs = backbone({"token_ids": np.array([[2, 5, 6, 3]]), "segment_ids": np.zeros((1, 4), "int32"),\n'
        '                    "padding_mask": np.ones((1, 4), bool)})\n'
        f'assert outputs["sequence_output"].shape == (1, 4, {size["hidden_dim"]})\n'
        "```\n"
    )


bert_tiny = _preset("bert_tiny")
bert_mini = _preset("bert_mini")
bert_small = _preset("bert_small")
bert_medium = _preset("bert_medium")
bert_base = _preset("bert_base")
bert_large = _preset("bert_large")


PRESETS = {name: globals()[name] for name in SIZES}


def bert_preset(name, weights=None, **overrides):
    """The preset called `name` ("bert_tiny" ... "bert_large"), as `kzoo.models.bert_tiny(...)` and the others build
    it; a name that is not a preset is an error listing them.

    Example:
    ```python
    from kzoo.models.bert_presets import bert_preset

    backbone = bert_preset("bert_mini", vocabulary_size=1000, max_sequence_length=16)
    assert backbone.get_config()["hidden_dim"] == 256
    ```
    """
    if name not in PRESETS:
        raise ValueError(f"preset={name!r} is not a BERT preset; use one of {tuple(PRESETS)}.")
    return PRESETS[name](weights=weights, **overrides)
