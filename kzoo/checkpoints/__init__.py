"""Public BERT checkpoints onto kzoo's models: Hugging Face and Google formats read, their names mapped onto kzoo's
variables with every tensor accounted for, and Google's published releases downloaded once and verified.

Reading needs numpy only (and TensorFlow's checkpoint reader for Google's format, imported when one is read), so the
models that load checkpoints stay backend-free.
"""

from kzoo.checkpoints.bert_checkpoint import BertCheckpoint, bert_config, load_checkpoint_weights, read_checkpoint
from kzoo.checkpoints.bert_releases import RELEASES, Release, cache_dir, checkpoint_folder, fetch, find_release
from kzoo.checkpoints.vocabulary_file import read_vocabulary
