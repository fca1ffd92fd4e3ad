"""BERT checkpoint files for the tests, written the way Hugging Face and Google lay them out.

The renaming here is written from the two formats' own conventions (transformers' modeling_bert.py and
google-research/bert's modeling.py), independently of kzoo.checkpoints.bert_checkpoint, so that a test that writes a
file here and reads it back through kzoo checks kzoo's mapping rather than repeating it.
"""

import json
import re
import zipfile

import numpy as np
import tensorflow as tf
from safetensors.numpy import save_file

REFERENCE = "tests/data/bert_checkpoint_reference"
TINY = f"{REFERENCE}/tiny_bert_for_pretraining"  # BertForPreTraining, "bert." prefix, gelu_new


def huggingface_tensors(config, seed=0):
    """Random tensors with the names and shapes of a Hugging Face `BertForPreTraining` of `config`."""
    rng = np.random.default_rng(seed)
    hidden, inner = config["hidden_size"], config["intermediate_size"]
    shapes = {
        "bert.embeddings.word_embeddings.weight": (config["vocab_size"], hidden),
        "bert.embeddings.position_embeddings.weight": (config["max_position_embeddings"], hidden),
        "bert.embeddings.token_type_embeddings.weight": (config["type_vocab_size"], hidden),
        "bert.embeddings.LayerNorm.weight": (hidden,),
        "bert.embeddings.LayerNorm.bias": (hidden,),
        "bert.pooler.dense.weight": (hidden, hidden),
        "bert.pooler.dense.bias": (hidden,),
        "cls.predictions.transform.dense.weight": (hidden, hidden),
        "cls.predictions.transform.dense.bias": (hidden,),
        "cls.predictions.transform.LayerNorm.weight": (hidden,),
        "cls.predictions.transform.LayerNorm.bias": (hidden,),
        "cls.predictions.bias": (config["vocab_size"],),
        "cls.seq_relationship.weight": (2, hidden),
        "cls.seq_relationship.bias": (2,),
    }
    for i in range(config["num_hidden_layers"]):
        layer = f"bert.encoder.layer.{i}"
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes[f"{layer}.{name}.weight"], shapes[f"{layer}.{name}.bias"] = (hidden, hidden), (hidden,)
        shapes[f"{layer}.intermediate.dense.weight"] = (inner, hidden)
        shapes[f"{layer}.intermediate.dense.bias"] = (inner,)
        shapes[f"{layer}.output.dense.weight"], shapes[f"{layer}.output.dense.bias"] = (hidden, inner), (hidden,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"{layer}.{norm}.weight"], shapes[f"{layer}.{norm}.bias"] = (hidden,), (hidden,)
    return {name: rng.normal(0.0, 0.3, shape).astype("float32") for name, shape in shapes.items()}


def google_name(huggingface_name):
    """Google's name for a Hugging Face tensor name, and whether Google stores the tensor transposed."""
    special = {
        "cls.predictions.bias": "cls/predictions/output_bias",
        "cls.seq_relationship.weight": "cls/seq_relationship/output_weights",  # (2, hidden) in both
        "cls.seq_relationship.bias": "cls/seq_relationship/output_bias",
    }
    if huggingface_name in special:
        return special[huggingface_name], False
    name = huggingface_name if huggingface_name.startswith(("bert.", "cls.")) else f"bert.{huggingface_name}"
    name = re.sub(r"\.layer\.(\d+)\.", r".layer_\1.", name)
    name = re.sub(r"LayerNorm\.weight$", "LayerNorm.gamma", name)
    name = re.sub(r"LayerNorm\.bias$", "LayerNorm.beta", name)
    name = re.sub(r"_embeddings\.weight$", "_embeddings", name)
    transposed = name.endswith(".weight")  # a torch.nn.Linear weight: (outputs, inputs)
    name = re.sub(r"\.weight$", ".kernel", name)
    return name.replace(".", "/"), transposed


def to_google(tensors):
    """Hugging Face tensors renamed and laid out as in Google's checkpoints; buffers dropped."""
    google = {}
    for name, array in tensors.items():
        if name.endswith("position_ids"):
            continue
        new_name, transposed = google_name(name)
        google[new_name] = np.ascontiguousarray(array.T if transposed else array)
    return google


def write_huggingface(folder, tensors, config):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    save_file({name: np.ascontiguousarray(array) for name, array in tensors.items()}, folder / "model.safetensors")
    return folder


def write_google(folder, tensors, config):
    """bert_config.json and bert_model.ckpt.{index,data-00000-of-00001}, written by TensorFlow's SaveV2 op."""
    folder.mkdir(parents=True, exist_ok=True)
    google_keys = ("attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "hidden_size",
                   "initializer_range", "intermediate_size", "max_position_embeddings", "num_attention_heads",
                   "num_hidden_layers", "type_vocab_size", "vocab_size")
    (folder / "bert_config.json").write_text(json.dumps({k: config[k] for k in google_keys if k in config}))
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]) + "\n")
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=str(folder / "bert_model.ckpt"),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(tensors[name]) for name in names],
    )
    return folder


def zip_folder(folder, archive, top_folder=None):
    """Zip the files of `folder`, at the top of the archive (as the 2020 releases) or inside `top_folder` (2018)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zip_file:
        for path in sorted(folder.iterdir()):
            zip_file.write(path, f"{top_folder}/{path.name}" if top_folder else path.name)
    return archive


def tiny_config():
    return json.loads(open(f"{TINY}/config.json").read())
