"""Command-line flags for a recipe's configuration dataclass: one `--flag` per field, with the field's default."""

import dataclasses


def _parse_bool(text):
    return text.lower() in ("1", "true", "yes")


def add_config_arguments(parser, config_class):
    """Add `--field-name` for every field of `config_class`, typed as the field (booleans read 1/true/yes)."""
    for field in dataclasses.fields(config_class):
        kind = _parse_bool if field.type is bool else field.type
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=kind, default=field.default)


def config_from_arguments(args, config_class):
    """The `config_class` instance that parsed `args` describe."""
    return config_class(**{field.name: getattr(args, field.name) for field in dataclasses.fields(config_class)})
