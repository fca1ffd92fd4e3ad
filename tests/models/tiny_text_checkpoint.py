"""A tiny Hugging Face BERT folder with a vocabulary, for tests of the raw-text task models: the reference checkpoint
(tests/data/bert_checkpoint_reference: 64 tokens, 32 positions, hidden 32) copied beside a vocab.txt of its size."""

import pathlib
import shutil

REFERENCE = pathlib.Path(__file__).resolve().parents[1] / "data/bert_checkpoint_reference/tiny_bert_for_pretraining"
WORDS = ["the", "a", "film", "is", "good", "bad", "dull", "fine", "movie", "great", ",", ".", "!", "cat", "dog", "sat",
         "on", "mat", "who", "where", "what", "paris", "london", "lives", "in"]
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
VOCABULARY += [f"##{chr(ord('a') + i)}" for i in range(64 - len(VOCABULARY))]
POSITIONS = 32


def tiny_checkpoint(folder):
    """Write the tiny uncased checkpoint into `folder` (created) and return its path."""
    folder = pathlib.Path(folder)
    shutil.copytree(REFERENCE, folder, ignore=shutil.ignore_patterns("pytorch_model.bin"))
    (folder / "vocab.txt").write_text("".join(f"{token}\n" for token in VOCABULARY), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text('{"do_lower_case": true}\n', encoding="utf-8")
    return folder
