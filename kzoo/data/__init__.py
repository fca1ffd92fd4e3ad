"""Readers for the corpora kzoo ships and for a user's own files, and where the shipped files are."""

from kzoo.data.glue import GlueExamples, glue
from kzoo.data.parallel_text import multi30k, read_lines, read_parallel
from kzoo.data.shipped import resolve_data_path, shipped_file, shipped_model
from kzoo.data.wikitext import WIKITEXT2_VOCABULARY, wikitext2_file, wikitext_documents
