"""SavedModel endpoints with text in and text (or labels, or vectors) out, written as atomic, numbered versions."""

from kzoo.export.classifier_export import export_classifier
from kzoo.export.embedder_export import export_embedder, sentence_embedding
from kzoo.export.saved_model_writer import serving_root, write_saved_model
from kzoo.export.translator_export import export_translator
from kzoo.export.versioned_dir import new_version, next_version
