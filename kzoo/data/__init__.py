"""Readers for the shipped corpora and for a user's own files."""

from kzoo.data.glue import GlueExamples, glue
from kzoo.data.parallel_text import multi30k, read_lines, read_parallel
from kzoo.data.wikitext import wikitext2_file, wikitext_documents
