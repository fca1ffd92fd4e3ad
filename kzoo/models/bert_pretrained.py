"""Where a BERT task's backbone and preprocessor come from, resolved in one place: a public checkpoint (with its own
tokenizer), a run of kzoo's pretraining recipe (its backbone.keras and vocab.txt), or a preset initialised at random
with a vocabulary. The preprocessor is `kzoo.text.BertPreprocessor`, imported only here, where raw text is asked for,
so that `kzoo.models` stays free of TensorFlow at import."""

import json
import pathlib

import keras

from kzoo.checkpoints.bert_checkpoint import load_checkpoint_weights, read_checkpoint
from kzoo.models.bert import Bert
from kzoo.models.bert_presets import PRESETS, bert_preset

BACKBONE_FILE = "backbone.keras"  # what kzoo's pretraining recipe writes into its run folder, beside vocab.txt
VOCABULARY_FILE = "vocab.txt"


def check_fits(backbone, preprocessor):
    """Raise a clear error unless `preprocessor`'s rows fit `backbone`: no longer than its learned positions, ids
    from a vocabulary of its size.

    Example:
    ```python
    from kzoo.models.bert_pretrained import check_fits

    backbone = kzoo.models.Bert(vocabulary_size=7, num_layers=1, hidden_dim=8, num_heads=2, max_sequence_length=16)
    preprocessor = kzoo.text.BertPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat"], 32)
    try:
        check_fits(backbone, preprocessor)
    except ValueError as error:
        print(error)  # sequence_length=32 is longer than the backbone's 16 learned positions ...
    ```
    """
    if preprocessor.sequence_length > backbone.max_sequence_length:
        raise ValueError(
            f"sequence_length={preprocessor.sequence_length} is longer than the backbone's "
            f"{backbone.max_sequence_length} learned positions: every text longer than about "
            f"{backbone.max_sequence_length - 2} pieces would fail. Use sequence_length={backbone.max_sequence_length} "
            "or less."
        )
    if preprocessor.vocabulary_size() != backbone.vocabulary_size:
        raise ValueError(
            f"The preprocessor's vocabulary has {preprocessor.vocabulary_size()} tokens but the backbone's token "
            f"embedding has {backbone.vocabulary_size}: use the vocabulary the backbone was trained with."
        )


def _with_overrides(backbone, overrides):
    """`backbone` rebuilt with other constructor arguments (dropout, dtype, name), its weights copied."""
    if not overrides:
        return backbone
    rebuilt = Bert.from_config({**backbone.get_config(), **overrides})
    rebuilt.set_weights(backbone.get_weights())
    return rebuilt


def _pretraining_run_folder(source):
    """The run folder of kzoo's pretraining recipe that `source` names (the folder or its backbone.keras), or None
    when `source` is not one."""
    path = pathlib.Path(source).expanduser()
    if path.is_file() and path.name.endswith(".keras"):
        path = path.parent
    return path if (path / BACKBONE_FILE).is_file() else None


def _run_lowercase(folder):
    """Whether a pretraining run lowercased its text: its config.json's `lowercase`, True for runs made before kzoo
    recorded it (the shipped vocabulary is uncased)."""
    config = folder / "config.json"
    return json.loads(config.read_text()).get("lowercase", True) if config.is_file() else True


def pretrained_bert(source, sequence_length=128, vocabulary=None, lowercase=True, **overrides):
    """A `Bert` backbone and the `kzoo.text.BertPreprocessor` that tokenizes for it, from one source.

    Args:
        source: str or path. One of
            - a public checkpoint: a Hugging Face or Google BERT folder, or a release name such as
              "uncased_L-2_H-128_A-2" (see `Bert.from_checkpoint`); the tokenizer is the checkpoint's own;
            - a run folder of `kzoo.train.bert_pretraining_recipe` (or its backbone.keras): the backbone it wrote,
              and the vocab.txt and lowercase setting it recorded;
            - a preset name ("bert_tiny" ... "bert_large"): a randomly initialised backbone of that size with
              `vocabulary`, and `sequence_length` positions.
        sequence_length: int. Tokens per row, special tokens included. Defaults to 128; at most the backbone's
            positions.
        vocabulary: a vocab.txt path (or `kzoo:` name, see `kzoo.data.resolve_data_path`) or list of tokens; only
            with a preset. Defaults to the shipped WikiText-2 vocabulary.
        lowercase: bool. Only with a preset: whether `vocabulary` is uncased. Defaults to True.
        **overrides: `Bert` arguments other than sizes (`dropout`, `dtype`, `name`).

    Example:
    ```python
    from kzoo.models.bert_pretrained import pretrained_bert

    backbone, preprocessor = pretrained_bert("bert_tiny", sequence_length=16, num_layers=1)
    inputs = preprocessor(["The café"])
    assert backbone(inputs)["pooled_output"].shape == (1, 128)
    ```
    """
    from kzoo.text.bert_preprocessor import BertPreprocessor

    if str(source) in PRESETS:
        from kzoo.data.shipped import resolve_data_path
        from kzoo.data.wikitext import WIKITEXT2_VOCABULARY

        if not isinstance(vocabulary, (list, tuple)):
            vocabulary = resolve_data_path(vocabulary or WIKITEXT2_VOCABULARY)
        preprocessor = BertPreprocessor(vocabulary, sequence_length=sequence_length, lowercase=lowercase)
        arguments = {"max_sequence_length": sequence_length, **overrides}
        backbone = bert_preset(str(source), vocabulary_size=preprocessor.vocabulary_size(), **arguments)
    elif vocabulary is not None:
        raise ValueError(f"vocabulary= is for a preset; {source} brings its own vocabulary.")
    elif (folder := _pretraining_run_folder(source)) is not None:
        if not (folder / VOCABULARY_FILE).is_file():
            raise FileNotFoundError(f"{folder} has {BACKBONE_FILE} but no {VOCABULARY_FILE}: it is not a whole run of "
                                    "kzoo's pretraining recipe.")
        backbone = _with_overrides(keras.saving.load_model(folder / BACKBONE_FILE, compile=False), overrides)
        preprocessor = BertPreprocessor(folder / VOCABULARY_FILE, sequence_length=sequence_length,
                                        lowercase=_run_lowercase(folder))
    else:
        checkpoint = read_checkpoint(source)
        backbone = Bert(**checkpoint.bert_arguments(**overrides))
        if sequence_length > backbone.max_sequence_length:  # before loading the weights
            raise ValueError(f"sequence_length={sequence_length} is longer than the {backbone.max_sequence_length} "
                             f"positions of {checkpoint.path}; use {backbone.max_sequence_length} or less.")
        load_checkpoint_weights(backbone, checkpoint)
        preprocessor = BertPreprocessor.from_checkpoint(checkpoint.path, sequence_length=sequence_length)
    check_fits(backbone, preprocessor)
    return backbone, preprocessor
