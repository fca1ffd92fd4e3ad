"""A cut-down copy of a Hugging Face BERT folder, for CI's runs of the notebooks that default to all-MiniLM-L6-v2:
its first layers, heads and feed-forward units (a smaller real checkpoint of the same format, vocabulary and
tokenizer), so that the notebooks' training, exports and serving checks run on a model a fraction of the size."""

import json
import pathlib
import re
import shutil

import numpy as np
from safetensors.numpy import save_file

from kzoo.checkpoints.safetensors_file import read_tensors


def small_checkpoint(source, folder, num_layers=2, num_heads=4, intermediate_dim=512):
    """Write into `folder` the first `num_layers` layers of the checkpoint `source`, keeping its first `num_heads`
    heads (the hidden width shrinks with them) and `intermediate_dim` feed-forward units; returns `folder`."""
    source, folder = pathlib.Path(source), pathlib.Path(folder)
    config = json.loads((source / "config.json").read_text())
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    sizes = {config["hidden_size"]: num_heads * head_dim, config["intermediate_size"]: intermediate_dim}
    if len(sizes) != 2 or config["vocab_size"] in sizes or config["max_position_embeddings"] in sizes:
        raise ValueError(f"{source}/config.json: its hidden, feed-forward, vocabulary and position sizes must differ "
                         "for the cut to tell the dimensions apart.")
    tensors = {}
    for name, value in read_tensors(source / "model.safetensors").items():
        layer = re.search(r"encoder\.layer\.(\d+)\.", name)
        if layer and int(layer.group(1)) >= num_layers:
            continue
        cut = tuple(slice(sizes.get(n, n)) for n in value.shape)  # the first units of every hidden/inner dimension
        tensors[name] = np.ascontiguousarray(value[cut])
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("model.safetensors", "pytorch_model.bin"))
    save_file(tensors, str(folder / "model.safetensors"))
    config.update(num_hidden_layers=num_layers, num_attention_heads=num_heads, hidden_size=num_heads * head_dim,
                  intermediate_size=intermediate_dim)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return folder
