"""A tiny Hugging Face BERT folder with a vocabulary, for tests of the raw-text task models: the reference checkpoint
(tests/data/bert_checkpoint_reference: 64 tokens, 32 positions, hidden 32) copied beside a vocab.txt of its size."""

import json
import pathlib
import shutil
import subprocess
import sys

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


def in_a_fresh_process(model_file, expression):
    """The JSON value of `expression` (Python, naming the loaded `model`) computed in a new Python process that
    imports kzoo and loads `model_file` with `keras.saving.load_model`, as a user's next session would."""
    script = (f"import json, keras, kzoo; model = keras.saving.load_model({str(model_file)!r}); "
              f"print(json.dumps({expression}))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])
