"""A recipe's configuration: a dataclass whose fields say what they mean and which values they accept, checked
before any work, and the command-line flags made from those fields (help, default and choices written once).

Example:
```python
import dataclasses
from kzoo.train.recipe_config import check_settings, setting

@dataclasses.dataclass
class Config:
    epochs: int = setting(3, "passes over the training data", minimum=1)
    pooling: str = setting("pooled", "what the head reads", choices=("pooled", "mean"))

    def __post_init__(self):
        check_settings(self)

Config(epochs=0)  # ValueError: Config: epochs=0 is below its minimum 1 (passes over the training data).
```
"""

import argparse
import dataclasses
import typing


def setting(default, help, *, choices=None, minimum=None, maximum=None, above=None, below=None):
    """A configuration field: its default, the help text its flag shows, and the values it accepts.

    Args:
        default: the default value (its type is the field's type).
        help: str. What the field means, as `--help` shows it.
        choices: the only values allowed, or None.
        minimum, maximum: inclusive bounds, or None.
        above, below: exclusive bounds, or None.

    Example:
    ```python
    import dataclasses
    from kzoo.train.recipe_config import setting

    @dataclasses.dataclass
    class Config:
        dropout: float = setting(0.1, "dropout rate", minimum=0.0, below=1.0)

    dataclasses.fields(Config)[0].metadata["help"]  # "dropout rate"
    ```
    """
    bounds = {"choices": choices, "minimum": minimum, "maximum": maximum, "above": above, "below": below}
    return dataclasses.field(default=default, metadata={"help": help, **bounds})


def check_settings(config):
    """Raise one `ValueError` naming every field of `config` whose value is of the wrong type or outside what its
    `setting` accepts; called by each recipe configuration's `__post_init__`, so a bad value fails before any work.

    Example:
    ```python
    from kzoo.train.translation_recipe import TranslationConfig

    try:
        TranslationConfig(steps_per_epoch=-5, beam_size=0)
    except ValueError as error:
        print(error)  # TranslationConfig: steps_per_epoch=-5 is below its minimum 0 (...); beam_size=0 is below ...
    ```
    """
    hints = typing.get_type_hints(type(config))
    problems = []
    for field in dataclasses.fields(config):
        value, meta, kind = getattr(config, field.name), field.metadata, hints[field.name]
        what = f" ({meta['help']})" if meta.get("help") else ""
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
            setattr(config, field.name, value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            problems.append(f"{field.name}={value!r} is not a {kind.__name__}{what}")
            continue
        if meta.get("choices") is not None and value not in meta["choices"]:
            problems.append(f"{field.name}={value!r} is not one of {tuple(meta['choices'])}{what}")
        for bound, fails, words in (("minimum", lambda v, b: v < b, "is below its minimum"),
                                    ("maximum", lambda v, b: v > b, "is above its maximum"),
                                    ("above", lambda v, b: v <= b, "must be above"),
                                    ("below", lambda v, b: v >= b, "must be below")):
            if meta.get(bound) is not None and fails(value, meta[bound]):
                problems.append(f"{field.name}={value!r} {words} {meta[bound]}{what}")
    if problems:
        raise ValueError(f"{type(config).__name__}: " + "; ".join(problems) + ".")


def add_config_arguments(parser, config_class):
    """Add `--field-name` for every field of `config_class`, with its help, default and choices; booleans are
    `--flag` / `--no-flag`.

    Example:
    ```python
    import argparse
    from kzoo.train.bert_finetuning_recipe import FinetuningConfig
    from kzoo.train.recipe_config import add_config_arguments, config_from_arguments

    parser = argparse.ArgumentParser()
    add_config_arguments(parser, FinetuningConfig)
    config = config_from_arguments(parser.parse_args(["--task", "mrpc", "--trim-padding"]), FinetuningConfig)
    config.task, config.trim_padding  # ("mrpc", True)
    ```
    """
    hints = typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        flag, meta, kind = f"--{field.name.replace('_', '-')}", field.metadata, hints[field.name]
        options = {"default": field.default, "help": meta.get("help", "")}
        if kind is bool:
            options["action"] = argparse.BooleanOptionalAction
        else:
            options["type"] = kind
            options["metavar"] = kind.__name__.upper()
            if meta.get("choices") is not None:
                options["choices"] = meta["choices"]
                options.pop("metavar")
        parser.add_argument(flag, **options)


def config_from_arguments(args, config_class):
    """The `config_class` instance that parsed `args` describe (checked by its `__post_init__`).

    Example:
    ```python
    import argparse
    from kzoo.train.recipe_config import add_config_arguments, config_from_arguments
    from kzoo.train.translation_recipe import TranslationConfig

    parser = argparse.ArgumentParser()
    add_config_arguments(parser, TranslationConfig)
    config_from_arguments(parser.parse_args(["--dropout", "0.3"]), TranslationConfig).dropout  # 0.3
    ```
    """
    return config_class(**{field.name: getattr(args, field.name) for field in dataclasses.fields(config_class)})
