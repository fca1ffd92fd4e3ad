"""Functional models built only from kzoo.layers."""

from kzoo.models.transformer import Transformer
from kzoo.models.transformer_presets import transformer_base, transformer_big, transformer_small
