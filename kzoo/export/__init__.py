"""SavedModel endpoints with text in and text (or labels, or vectors) out, written as atomic, numbered versions; and
CTranslate2 model folders for the fastest CPU translation (`export_ctranslate2`, optional extra)."""

from kzoo._lazy import lazy_namespace

__getattr__, __dir__ = lazy_namespace(__name__, {
    "export_classifier": "kzoo.export.classifier_export",
    "export_ctranslate2": "kzoo.export.ctranslate2_export",
    "export_embedder": "kzoo.export.embedder_export",
    "sentence_embedding": "kzoo.export.embedder_export",
    "serving_root": "kzoo.export.saved_model_writer",
    "write_saved_model": "kzoo.export.saved_model_writer",
    "export_translator": "kzoo.export.translator_export",
    "new_version": "kzoo.export.versioned_dir",
    "next_version": "kzoo.export.versioned_dir",
    "remove_stale_partials": "kzoo.export.versioned_dir",
    "write_version": "kzoo.export.versioned_dir",
})
