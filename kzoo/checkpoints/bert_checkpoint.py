"""Reading public BERT checkpoints into kzoo's `Bert` and `BertPretrainer`, every tensor accounted for.

Two formats, told apart by their files:

- Hugging Face folders: `config.json` and `model.safetensors`, or `pytorch_model.bin` (read with
  `torch.load(..., weights_only=True)`; it needs PyTorch). Weight names with the `bert.` prefix (`BertForPreTraining`
  and task models, with the `cls.` pretraining heads) or without it (`BertModel`).
- Google's original TensorFlow checkpoints, as in the google-research/bert zips (`uncased_L-4_H-512_A-8`):
  `bert_config.json` and `bert_model.ckpt.*`, variable names such as `bert/encoder/layer_0/attention/self/query/kernel`.

kzoo's variables are addressed by Google's names (dense kernels stored (inputs, outputs), as Keras stores them);
Hugging Face names are derived from those (`encoder.layer.0.attention.self.query.weight`, stored transposed, as
PyTorch stores it). Before anything is assigned, every variable must find its tensor with the expected shape: a
missing tensor, a shape mismatch, or a tensor of the encoder that kzoo has no place for is an error that names it.
Tensors of heads the model lacks (the pretraining heads when loading a `Bert`, a fine-tuned classifier) are listed
in the returned report and logged at INFO level on the "kzoo" logger. Optimizer slots, `position_ids` buffers and
Hugging Face's copies of tied tensors are ignored and listed too.

Configuration: vocab_size → vocabulary_size, num_hidden_layers → num_layers, hidden_size → hidden_dim,
num_attention_heads → num_heads, intermediate_size → intermediate_dim, max_position_embeddings →
max_sequence_length, type_vocab_size → num_segments, hidden_dropout_prob → dropout, layer_norm_eps →
layer_norm_epsilon (1e-12 when absent, as in Google's files), initializer_range. hidden_act "gelu" is the exact erf
GELU; "gelu_new", "gelu_pytorch_tanh" and "gelu_fast" are the tanh approximation (`kzoo.layers.gelu_approximate`);
"relu" is ReLU. Google's files say "gelu" as well and are read as the erf form, as Hugging Face's converter reads
them (transformers documents its erf "gelu" as google-research/bert's original function, and the tanh "gelu_new" as
the one that repository uses now; pass `activation=kzoo.layers.gelu_approximate` to choose the latter). Rejected:
model types other than "bert", position_embedding_type other than "absolute", decoders.

Example:
```python
checkpoint = kzoo.checkpoints.bert_checkpoint.read_checkpoint("all-MiniLM-L6-v2/")
backbone = kzoo.models.Bert(**checkpoint.bert_arguments())
report = kzoo.checkpoints.bert_checkpoint.load_checkpoint_weights(backbone, checkpoint)
# The same in one call: kzoo.models.Bert.from_checkpoint("all-MiniLM-L6-v2/")
```

References:
    - [google-research/bert](https://github.com/google-research/bert), modeling.py: the variable names.
    - [Hugging Face transformers](https://github.com/huggingface/transformers), models/bert/modeling_bert.py.
"""

import dataclasses
import json
import logging
import pathlib
import re

import ml_dtypes
import numpy as np

from kzoo.checkpoints import safetensors_file
from kzoo.checkpoints.bert_releases import checkpoint_folder
from kzoo.checkpoints.vocabulary_file import read_vocabulary
from kzoo.layers.activations import gelu_approximate

logger = logging.getLogger("kzoo")

_FIELDS = {  # configuration field: `Bert` argument
    "vocab_size": "vocabulary_size",
    "num_hidden_layers": "num_layers",
    "hidden_size": "hidden_dim",
    "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_dim",
    "max_position_embeddings": "max_sequence_length",
    "type_vocab_size": "num_segments",
    "hidden_dropout_prob": "dropout",
    "layer_norm_eps": "layer_norm_epsilon",
    "initializer_range": "initializer_range",
}
_REQUIRED_FIELDS = ("vocab_size", "num_hidden_layers", "hidden_size", "num_attention_heads")
_SIZES = ("vocabulary_size", "num_layers", "hidden_dim", "num_heads", "intermediate_dim", "max_sequence_length",
          "num_segments")
_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": gelu_approximate,
    "gelu_pytorch_tanh": gelu_approximate,
    "gelu_fast": gelu_approximate,
    "relu": "relu",
}
_NOT_WEIGHTS = re.compile(r"(^|[./])(position_ids|global_step)$|/adam_[mv]$")
_ENCODER_PREFIXES = {"huggingface": ("bert.", "embeddings.", "encoder.", "pooler."), "google": ("bert/",)}
# Hugging Face's copies of tied tensors: (copy, the Google name of the tensor it must equal).
_TIED_COPIES = (
    ("cls.predictions.decoder.weight", "bert/embeddings/word_embeddings"),
    ("cls.predictions.decoder.bias", "cls/predictions/output_bias"),
)


@dataclasses.dataclass
class BertCheckpoint:
    """A BERT checkpoint read into memory, as `read_checkpoint` returns it.

    Attributes:
        path: pathlib.Path. The folder holding the configuration and weights.
        format: str. "huggingface" or "google".
        config: dict. The `Bert` arguments the checkpoint's configuration gives.
        tensors: dict of str to numpy array. Every tensor of the file, under its name in the file.
        vocabulary_file: pathlib.Path or None. The WordPiece vocabulary (vocab.txt) beside the weights.

    Example:
    ```python
    import pathlib
    tiny = pathlib.Path(kzoo.__file__).parents[1] / "tests/data/bert_checkpoint_reference/tiny_bert_for_pretraining"
    from kzoo.checkpoints import read_checkpoint

    checkpoint = read_checkpoint(tiny)  # a Hugging Face BertForPreTraining folder of 2 layers, width 32
    assert (checkpoint.format, checkpoint.config["hidden_dim"]) == ("huggingface", 32)
    vocabulary_size = checkpoint.config["vocabulary_size"]
    assert checkpoint.tensors["bert.embeddings.word_embeddings.weight"].shape == (vocabulary_size, 32)
    assert checkpoint.bert_arguments(dropout=0.0)["dropout"] == 0.0
    ```
    """

    path: pathlib.Path
    format: str
    config: dict
    tensors: dict
    vocabulary_file: pathlib.Path | None

    def bert_arguments(self, **overrides):
        """`config` with `overrides` (dropout, dtype, name, activation, ...) applied.

        Sizes cannot be overridden: an override that disagrees with the checkpoint's vocabulary, depth, width,
        heads, feed-forward size, positions or segments is an error.
        """
        conflicts = {k: v for k, v in overrides.items() if k in _SIZES and v != self.config[k]}
        if conflicts:
            who = overrides.get("name") or "Bert.from_checkpoint"
            asked = ", ".join(f"{k}={v}" for k, v in conflicts.items())
            found = ", ".join(f"{k}={self.config[k]}" for k in conflicts)
            raise ValueError(
                f"{who} asks for {asked}, but the checkpoint {self.path} has {found}. A checkpoint's sizes cannot "
                f"be changed: call kzoo.models.Bert.from_checkpoint({str(self.path)!r}) without size arguments, or "
                "use the preset of the checkpoint's size."
            )
        return {**self.config, **overrides}


def read_checkpoint(path):
    """Read a BERT checkpoint: a Hugging Face or Google folder, or the name of a published Google release.

    Args:
        path: str or path-like. A folder with config.json (Hugging Face) or bert_config.json (Google), directly or
            in its one subfolder; or a name from `kzoo.checkpoints.bert_releases.RELEASES`, downloaded on first use.

    Returns:
        A `BertCheckpoint`.

    Example:
    ```python
    import pathlib
    tiny = pathlib.Path(kzoo.__file__).parents[1] / "tests/data/bert_checkpoint_reference/tiny_bert_for_pretraining"
    from kzoo.checkpoints import read_checkpoint

    checkpoint = read_checkpoint(tiny)
    assert checkpoint.config["num_layers"] == 2 and checkpoint.config["activation"] is kzoo.layers.gelu_approximate
    ```
    """
    folder = checkpoint_folder(path)
    google = (folder / "bert_config.json").is_file() or any(folder.glob("*.index"))
    config_file = folder / ("bert_config.json" if google else "config.json")
    config = bert_config(read_config_file(config_file), config_file)  # before reading the weights
    vocabulary = folder / "vocab.txt"
    if vocabulary.is_file():
        read_vocabulary(vocabulary)  # a binary or non-UTF-8 vocab.txt is refused here, naming the file
    if google:
        shapes, weights_file, read = _google_reader(folder)
    else:
        shapes, weights_file, read = _huggingface_reader(folder)
    check_shapes(config, shapes, "google" if google else "huggingface", config_file, weights_file)
    return BertCheckpoint(
        path=folder,
        format="google" if google else "huggingface",
        config=config,
        tensors=read(),
        vocabulary_file=vocabulary if vocabulary.is_file() else None,
    )


def read_config_file(config_file):
    """A checkpoint's configuration file (config.json or bert_config.json) as a dict; a missing file, one that is
    not JSON, or JSON that is not an object is an error naming the file and what was expected.

    Example:
    ```python
    import pathlib
    from kzoo.checkpoints.bert_checkpoint import read_config_file

    pathlib.Path("config.json").write_text('{"vocab_size": 30522, "hidden_size": 768}')
    assert read_config_file("config.json")["hidden_size"] == 768
    pathlib.Path("config.json").write_text("[1, 2]")
    try:
        read_config_file("config.json")
    except ValueError as error:
        assert "config.json holds a JSON list; expected a BERT configuration" in str(error)
    ```
    """
    config_file = pathlib.Path(config_file)
    expected = ("expected a BERT configuration, a JSON object with vocab_size, num_hidden_layers, hidden_size and "
                "num_attention_heads")
    if not config_file.is_file():
        raise FileNotFoundError(f"{config_file} does not exist: {expected}, beside the weights.")
    try:
        config = json.loads(config_file.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"{config_file} is not UTF-8 text (byte offset {error.start}): {expected}.") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{config_file} is not JSON ({error}): {expected}.") from None
    if not isinstance(config, dict):
        kind = {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(config), "null")
        raise ValueError(f"{config_file} holds a JSON {kind}; {expected}.")
    return config


def bert_config(config, source="the configuration"):
    """`Bert` arguments from a BERT configuration (config.json or bert_config.json, as a dict); `source` names the
    file in errors.

    Example:
    ```python
    from kzoo.checkpoints import bert_config

    arguments = bert_config({"vocab_size": 100, "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
                             "hidden_act": "gelu"})
    assert arguments == {"vocabulary_size": 100, "num_layers": 2, "hidden_dim": 64, "num_heads": 2,
                         "activation": "gelu"}
    try:
        bert_config({"vocab_size": 100, "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 0})
    except ValueError as error:
        assert "num_attention_heads=0: expected a positive integer" in str(error)
    ```
    """
    model_type = config.get("model_type", "bert")
    if model_type != "bert":
        raise ValueError(f"{source} describes model_type={model_type!r}; kzoo's Bert reads only 'bert' checkpoints.")
    position_type = config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(
            f"{source} has position_embedding_type={position_type!r}; kzoo's Bert has only learned absolute "
            "position embeddings ('absolute')."
        )
    for flag in ("is_decoder", "add_cross_attention"):
        if config.get(flag):
            raise ValueError(f"{source} has {flag}=true; kzoo's Bert is an encoder without cross-attention.")
    missing = [field for field in _REQUIRED_FIELDS if field not in config]
    if missing:
        raise ValueError(f"{source} lacks {', '.join(missing)}: it is not a BERT configuration.")
    activation = config.get("hidden_act", "gelu")
    if activation not in _ACTIVATIONS:
        raise ValueError(
            f"{source} has hidden_act={activation!r}; supported: {', '.join(_ACTIVATIONS)}. Pass activation= to "
            "Bert.from_checkpoint to choose a Keras activation yourself."
        )
    arguments = {argument: config[field] for field, argument in _FIELDS.items() if field in config}
    for field, argument in _FIELDS.items():
        value = arguments.get(argument)
        if argument in _SIZES and value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                                         or value < 1):
            raise ValueError(f"{source} has {field}={value!r}: expected a positive integer.")
        if argument in ("dropout", "layer_norm_epsilon", "initializer_range") and value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1):
            raise ValueError(f"{source} has {field}={value!r}: expected a number in [0, 1).")
    if arguments["hidden_dim"] % arguments["num_heads"]:
        raise ValueError(f"{source} has hidden_size={arguments['hidden_dim']}, which is not divisible by "
                         f"num_attention_heads={arguments['num_heads']}.")
    arguments["activation"] = _ACTIVATIONS[activation]
    attention_dropout = config.get("attention_probs_dropout_prob", arguments.get("dropout"))
    if attention_dropout != arguments.get("dropout"):
        logger.warning(
            "%s: kzoo's Bert uses one dropout rate; it takes hidden_dropout_prob=%s, not "
            "attention_probs_dropout_prob=%s.", source, arguments.get("dropout"), attention_dropout
        )
    return arguments


def load_checkpoint_weights(model, checkpoint):
    """Assign a checkpoint's tensors to a `Bert`, or to a `BertPretrainer` with its two heads.

    Every variable must find its tensor with the expected shape, or nothing is assigned and a `ValueError` names
    the missing tensors, the mismatched ones with both shapes, or the encoder tensors kzoo has no place for.

    Args:
        model: `kzoo.models.Bert` or `kzoo.models.BertPretrainer`, with the checkpoint's sizes.
        checkpoint: `BertCheckpoint`.

    Returns:
        A dict: `loaded` (names in the file), `unused` (tensors of heads the model lacks), `ignored` (optimizer
        slots, buffers, tied copies).

    Example:
    ```python
    import pathlib
    tiny = pathlib.Path(kzoo.__file__).parents[1] / "tests/data/bert_checkpoint_reference/tiny_bert_for_pretraining"
    from kzoo.checkpoints import load_checkpoint_weights, read_checkpoint

    checkpoint = read_checkpoint(tiny)
    backbone = kzoo.models.Bert(**checkpoint.bert_arguments())
    report = load_checkpoint_weights(backbone, checkpoint)
    assert len(report["unused"]) == 7  # the pretraining heads, which a Bert has no place for
    np.testing.assert_array_equal(backbone.pooler.bias.numpy(), checkpoint.tensors["bert.pooler.dense.bias"])
    ```
    """
    backbone = getattr(model, "backbone", model)
    targets = _backbone_targets(backbone)
    with_heads = hasattr(model, "masked_lm_head")
    if with_heads:
        targets.update(_head_targets(model))
    sources = {name: _source(name, checkpoint.format, checkpoint.tensors) for name in targets}

    missing = [file_name for file_name, _ in sources.values() if file_name not in checkpoint.tensors]
    if missing:
        raise ValueError(_missing_message(model, checkpoint, missing, with_heads))
    mismatches = []
    for name, (variable, shape, _) in targets.items():
        file_name, file_transposed = sources[name]
        found = checkpoint.tensors[file_name].shape
        expected = shape[::-1] if file_transposed else shape
        if tuple(found) != tuple(expected):
            mismatches.append(f"{file_name}: expected {tuple(expected)}, found {tuple(found)} (for {variable.path})")
    if mismatches:
        raise ValueError(
            f"{checkpoint.path}: {len(mismatches)} tensors do not have the shapes of kzoo's Bert("
            f"{_sizes(backbone)}) built from its configuration:\n  " + "\n  ".join(mismatches)
        )

    loaded = {file_name for file_name, _ in sources.values()}
    ignored = [n for n in checkpoint.tensors if _NOT_WEIGHTS.search(n)]
    ignored += [copy for copy, original in _TIED_COPIES if _is_tied_copy(copy, original, checkpoint)]
    rest = [n for n in checkpoint.tensors if n not in loaded and n not in ignored]
    unknown = [n for n in rest if n.startswith(_ENCODER_PREFIXES[checkpoint.format])]
    if unknown:
        raise ValueError(
            f"{checkpoint.path} has encoder tensors that kzoo's Bert({_sizes(backbone)}) has no place for: "
            f"{', '.join(unknown)}. The checkpoint is not a plain BERT, or its configuration does not describe it."
        )
    unused_heads = [n for n in rest if with_heads and n.startswith(("cls.", "cls/"))]
    if unused_heads:
        raise ValueError(
            f"{checkpoint.path} has pretraining-head tensors that {model.name} has no place for: "
            f"{', '.join(unused_heads)}. (kzoo's masked-LM head is tied to the token embeddings, as BERT's is, so a "
            "decoder that differs from them cannot be loaded.)"
        )

    not_finite = []
    for file_name in sorted(loaded):
        array = checkpoint.tensors[file_name]
        if array.dtype.kind == "f" or array.dtype == ml_dtypes.bfloat16:
            bad = array.size - np.count_nonzero(np.isfinite(array))
            if bad:
                not_finite.append(f"{file_name} ({bad} of {array.size} values)")
    if not_finite:
        raise ValueError(f"{checkpoint.path}: tensors hold NaN or infinite values: {', '.join(not_finite)}. The "
                         "checkpoint is damaged (download it again) or comes from a run that diverged; nothing was "
                         "loaded.")
    for name, (variable, _, transposed) in targets.items():
        file_name, file_transposed = sources[name]
        array = checkpoint.tensors[file_name]
        array = array.T if file_transposed else array  # Google's layout
        array = array.T if transposed else array  # kzoo's layout, up to the split of the heads
        variable.assign(np.reshape(array, variable.shape).astype(variable.dtype))
    logger.info("Loaded %d tensors from %s into %s.", len(loaded), checkpoint.path, model.name)
    if rest:
        logger.info(
            "Not loaded into %s, which has no place for them (BertPretrainer.from_checkpoint loads the pretraining "
            "heads cls.*): %s", model.name, ", ".join(rest)
        )
    return {"loaded": sorted(loaded), "unused": rest, "ignored": ignored}


def _huggingface_reader(folder):
    """(every tensor's shape, the weights file, a function that reads the tensors): from the safetensors header
    alone, before anything is allocated; a PyTorch file has to be read for its shapes."""
    if (folder / "model.safetensors").is_file():
        file = folder / "model.safetensors"
        header = safetensors_file.read_header(file)
        shapes = {name: shape for name, (_, shape, _) in header[0].items()}
        return shapes, file, lambda: safetensors_file.read_tensors(file, header)
    if (folder / "pytorch_model.bin").is_file():
        tensors = _read_pytorch(folder / "pytorch_model.bin")
        return {name: array.shape for name, array in tensors.items()}, folder / "pytorch_model.bin", lambda: tensors
    raise FileNotFoundError(
        f"{folder} has config.json but neither model.safetensors nor pytorch_model.bin (sharded and other "
        "weight files are not supported)."
    )


def expected_shapes(config):
    """{Google name: shape in Google's layout} of the tensors whose shapes carry every size of a configuration (`Bert`
    arguments, as `bert_config` gives them): the embeddings, and each layer's attention and feed-forward kernels.

    Example:
    ```python
    from kzoo.checkpoints.bert_checkpoint import expected_shapes

    shapes = expected_shapes({"vocabulary_size": 100, "num_layers": 2, "hidden_dim": 8, "num_heads": 2})
    assert shapes["bert/embeddings/word_embeddings"] == (100, 8)
    assert shapes["bert/encoder/layer_1/intermediate/dense/kernel"] == (8, 32)  # 4 × hidden_dim by default
    assert shapes["bert/embeddings/position_embeddings"] == (512, 8)
    ```
    """
    hidden = config["hidden_dim"]
    inner = config.get("intermediate_dim") or 4 * hidden
    shapes = {
        "bert/embeddings/word_embeddings": (config["vocabulary_size"], hidden),
        "bert/embeddings/position_embeddings": (config.get("max_sequence_length", 512), hidden),
        "bert/embeddings/token_type_embeddings": (config.get("num_segments", 2), hidden),
        "bert/pooler/dense/kernel": (hidden, hidden),
    }
    for i in range(config["num_layers"]):
        layer = f"bert/encoder/layer_{i}"
        for part in ("self/query", "self/key", "self/value", "output/dense"):
            shapes[f"{layer}/attention/{part}/kernel"] = (hidden, hidden)
        shapes[f"{layer}/intermediate/dense/kernel"] = (hidden, inner)
        shapes[f"{layer}/output/dense/kernel"] = (inner, hidden)
    return shapes


def check_shapes(config, shapes, format, config_file="the configuration", weights_file="the weights"):
    """Compare a configuration (`Bert` arguments) with the tensors' shapes ({name in the file: shape}) before any
    model is built, so that a configuration that does not describe the weights (`hidden_size: 400000`) fails at once
    instead of allocating for it. `format` is "huggingface" or "google". Tensors the file lacks are left to
    `load_checkpoint_weights`, which names them; a file with more or fewer encoder layers than the configuration
    says is an error here.

    Example:
    ```python
    from kzoo.checkpoints.bert_checkpoint import check_shapes

    config = {"vocabulary_size": 100, "num_layers": 1, "hidden_dim": 400000, "num_heads": 2}
    shapes = {"embeddings.word_embeddings.weight": (100, 8)}
    try:
        check_shapes(config, shapes, "huggingface", "config.json", "model.safetensors")
    except ValueError as error:
        assert "embeddings.word_embeddings.weight: expected (100, 400000), found (100, 8)" in str(error)
    ```
    """
    mismatches = []
    for google_name, shape in expected_shapes(config).items():
        file_name, transposed = _source(google_name, format, shapes)
        if file_name in shapes:
            expected = shape[::-1] if transposed else shape
            if tuple(shapes[file_name]) != tuple(expected):
                mismatches.append(f"{file_name}: expected {tuple(expected)}, found {tuple(shapes[file_name])}")
    layers = {int(m.group(1)) for name in shapes for m in [re.search(r"layer[._](\d+)[./]", name)] if m}
    if layers and max(layers) + 1 != config["num_layers"]:
        mismatches.append(f"{max(layers) + 1} encoder layers, but num_hidden_layers={config['num_layers']}")
    if mismatches:
        raise ValueError(
            f"{config_file} does not describe the tensors of {weights_file} ({len(mismatches)} disagree), so no "
            "model was built:\n  " + "\n  ".join(mismatches[:12])
            + (f"\n  and {len(mismatches) - 12} more" if len(mismatches) > 12 else "")
        )


def _read_pytorch(file):
    try:
        import torch
    except ImportError as error:
        raise ImportError(
            f"{file} is a PyTorch file, and reading it needs PyTorch: pip install torch (the CPU build is enough: "
            "pip install torch --index-url https://download.pytorch.org/whl/cpu). Or use the folder's "
            "model.safetensors, which kzoo reads without PyTorch."
        ) from error
    state = torch.load(file, map_location="cpu", weights_only=True)
    return {name: (t.float() if t.is_floating_point() else t).numpy() for name, t in state.items()}


def _google_reader(folder):
    """Like `_huggingface_reader`, for a Google checkpoint: shapes from the checkpoint's index."""
    indexes = sorted(folder.glob("*.index"))
    if len(indexes) != 1:
        raise FileNotFoundError(
            f"{folder} has bert_config.json and {len(indexes)} checkpoint index files "
            f"({', '.join(p.name for p in indexes) or 'none'}); expected one, bert_model.ckpt.index."
        )
    import tensorflow as tf  # here, not at the top: kzoo's models also run on Keras's other backends

    try:
        reader = tf.train.load_checkpoint(str(indexes[0].with_suffix("")))
        shapes = {name: tuple(shape) for name, shape in reader.get_variable_to_shape_map().items()}
    except (tf.errors.OpError, ValueError) as error:
        raise ValueError(f"{indexes[0]} is not a readable TensorFlow checkpoint ({error.__class__.__name__}: "
                         f"{str(error).splitlines()[0]}); download the checkpoint again.") from None
    return shapes, indexes[0], lambda: {name: reader.get_tensor(name) for name in shapes}


def _source(google_name, format, names):
    """The name of `google_name` among a checkpoint file's tensor `names`, and whether the file stores it transposed
    to Google; `format` is "huggingface" or "google"."""
    if format == "google":
        return google_name, False
    candidates, transposed = _huggingface_names(google_name)
    found = [c for c in candidates if c in names]
    if found:
        return found[0], transposed
    prefixed = any(n.startswith("bert.") for n in names)
    unprefixed = [c for c in candidates if not c.startswith("bert.")]
    return (candidates[0] if prefixed or not unprefixed else unprefixed[0]), transposed


def _huggingface_names(google_name):
    """The names a Hugging Face file may give Google's `google_name` (with and without the `bert.` prefix, and
    with the old gamma/beta names of layer norms), and whether it stores the tensor transposed."""
    special = {
        "cls/predictions/output_bias": "cls.predictions.bias",
        "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",  # (2, hidden) in both
        "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
    }
    if google_name in special:
        return [special[google_name]], False
    *path, leaf = google_name.split("/")
    path = ".".join(re.sub(r"^layer_(\d+)$", r"layer.\1", part) for part in path)
    if leaf.endswith("_embeddings"):
        names, transposed = [f"{path}.{leaf}.weight"], False
    elif leaf == "gamma":
        names, transposed = [f"{path}.weight", f"{path}.gamma"], False
    elif leaf == "beta":
        names, transposed = [f"{path}.bias", f"{path}.beta"], False
    else:
        names, transposed = [f"{path}.{'weight' if leaf == 'kernel' else leaf}"], leaf == "kernel"
    if path.startswith("bert."):
        names += [name.removeprefix("bert.") for name in names]
    return names, transposed


def _is_tied_copy(copy, original, checkpoint):
    if checkpoint.format != "huggingface" or copy not in checkpoint.tensors:
        return False
    original_name, _ = _source(original, checkpoint.format, checkpoint.tensors)
    original_tensor = checkpoint.tensors.get(original_name)
    return original_tensor is not None and np.array_equal(checkpoint.tensors[copy], original_tensor)


def _as_is(variables):
    return {name: (variable, tuple(variable.shape), False) for name, variable in variables.items()}


def _dense(name, layer):
    return _as_is({f"{name}/kernel": layer.kernel, f"{name}/bias": layer.bias})


def _norm(name, layer):
    return _as_is({f"{name}/gamma": layer.gamma, f"{name}/beta": layer.beta})


def _backbone_targets(bert):
    """{Google name: (kzoo variable, the tensor's shape in Google's layout, whether that layout is the variable's
    transposed)} for every variable of `bert`. Attention kernels only differ by the split of the heads."""
    targets = _as_is({
        "bert/embeddings/word_embeddings": bert.token_embedding.embeddings,
        "bert/embeddings/token_type_embeddings": bert.segment_embedding.embeddings,
        "bert/embeddings/position_embeddings": bert.position_embedding.position_embeddings,
    })
    targets.update(_norm("bert/embeddings/LayerNorm", bert.embeddings_norm))
    for i, block in enumerate(bert.encoder_blocks):
        layer, attention = f"bert/encoder/layer_{i}", block.self_attention
        for part in ("query", "key", "value"):
            kernel, bias = getattr(attention, f"{part}_kernel"), getattr(attention, f"{part}_bias")
            d, heads, head_dim = kernel.shape  # Google's (d, heads · head_dim), head by head
            targets[f"{layer}/attention/self/{part}/kernel"] = (kernel, (d, heads * head_dim), False)
            targets[f"{layer}/attention/self/{part}/bias"] = (bias, (heads * head_dim,), False)
        heads, head_dim, d = attention.output_kernel.shape
        targets[f"{layer}/attention/output/dense/kernel"] = (attention.output_kernel, (heads * head_dim, d), False)
        targets[f"{layer}/attention/output/dense/bias"] = (attention.output_bias, (d,), False)
        targets.update(_norm(f"{layer}/attention/output/LayerNorm", block.self_attention_norm))
        targets.update(_dense(f"{layer}/intermediate/dense", block.feed_forward.intermediate_dense))
        targets.update(_dense(f"{layer}/output/dense", block.feed_forward.output_dense))
        targets.update(_norm(f"{layer}/output/LayerNorm", block.feed_forward_norm))
    targets.update(_dense("bert/pooler/dense", bert.pooler))
    return targets


def _head_targets(pretrainer):
    """Like `_backbone_targets`, for the masked-LM and next-sentence heads of a `BertPretrainer`."""
    head, nsp = pretrainer.masked_lm_head, pretrainer.next_sentence_head
    targets = _dense("cls/predictions/transform/dense", head.dense)
    targets.update(_norm("cls/predictions/transform/LayerNorm", head.norm))
    targets.update(_as_is({"cls/predictions/output_bias": head.output_bias,
                             "cls/seq_relationship/output_bias": nsp.bias}))
    # Google (and Hugging Face) store the next-sentence kernel as (2, hidden): the transpose of a Keras kernel.
    targets["cls/seq_relationship/output_weights"] = (nsp.kernel, tuple(nsp.kernel.shape)[::-1], True)
    return targets


def _sizes(bert):
    return ", ".join(f"{name}={getattr(bert, name)}" for name in _SIZES)


def _missing_message(model, checkpoint, missing, with_heads):
    """The error for tensors the model needs and the checkpoint lacks; distinct when it has no heads at all."""
    if with_heads and not any(name.startswith(("cls.", "cls/")) for name in checkpoint.tensors):
        return (
            f"{checkpoint.path} has no pretraining heads ({', '.join(missing)} are missing): it holds an encoder "
            f"only, so {model.name} cannot be loaded from it. Load the encoder with "
            f"kzoo.models.Bert.from_checkpoint({str(checkpoint.path)!r}) and put new heads on it, "
            "e.g. kzoo.models.BertPretrainer(backbone), to train them."
        )
    shown = ", ".join(missing[:12]) + (f" and {len(missing) - 12} more" if len(missing) > 12 else "")
    return (
        f"{checkpoint.path} lacks {len(missing)} tensors that kzoo's Bert({_sizes(getattr(model, 'backbone', model))}) "
        f"built from its configuration needs: {shown}. Nothing was loaded."
    )
