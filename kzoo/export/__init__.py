"""SavedModel endpoints with text in and text out, written as atomic, numbered versions."""

from kzoo.export.translator_export import export_translator
from kzoo.export.versioned_dir import new_version, next_version
