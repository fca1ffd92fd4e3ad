"""benchmarks/bert_pretraining_accelerator.py: its static masks are kzoo's own (pass 0 the pipeline's, pass p the
pipeline's rule at later epochs' seeds), its batches rebuild them exactly, and the export keeps to its size bound;
end to end (slow): export (TensorFlow), train under JAX with TensorFlow unimportable, import (TensorFlow)."""

import importlib.util
import json

import numpy as np
import pytest

from kzoo.text.bert_preprocessor import BertPreprocessor
from kzoo.text.pretraining_data import masked_lm_rule, pretraining_dataset
from kzoo.text.wordpiece import RESERVED_TOKENS
from tests.benchmarks.test_gpu_jax import WITHOUT_TENSORFLOW, run
from tests.train.worker_processes import REPOSITORY

SCRIPT = REPOSITORY / "benchmarks" / "bert_pretraining_accelerator.py"
spec = importlib.util.spec_from_file_location("bert_pretraining_accelerator", SCRIPT)
accelerator = importlib.util.module_from_spec(spec)
spec.loader.exec_module(accelerator)

# A synthetic corpus of 60 documents of 30 one-token sentences: about 150 pairs a pipeline epoch.
WORDS = [f"w{i}" for i in range(40)]


def documents():
    return ([" ".join(WORDS[(d + k) % 40] for k in range(j, j + 6)) for j in range(0, 30, 6)] for d in range(60))


@pytest.fixture(scope="module")
def preprocessor():
    return BertPreprocessor(list(RESERVED_TOKENS) + WORDS, sequence_length=24)


def pipeline(preprocessor):
    return pretraining_dataset(documents, preprocessor, batch_size=16, max_predictions=4, seed=5, document_buffer=8)


def epoch_batches(dataset):
    return [(f["token_ids"].numpy(), f["masked_positions"].numpy(), f["segment_ids"].numpy(), y["mlm"].numpy(),
             y["nsp"].numpy(), w["mlm"].numpy()) for f, y, w in dataset]


@pytest.fixture(scope="module")
def exported(preprocessor):
    """Two pipeline epochs and a half of pairs, three passes of masks, and the pipeline's own first three epochs."""
    dataset = pipeline(preprocessor)
    epochs = [epoch_batches(dataset) for _ in range(3)]
    count = len(epochs[0]) + len(epochs[1]) + 3
    mask = masked_lm_rule(preprocessor, max_predictions=4)
    data = accelerator.masked_passes(pipeline(preprocessor), count, 3, mask, 5, preprocessor.vocabulary_size(),
                                     preprocessor.token_to_id("[MASK]"))
    return {name: value.astype(np.int32) for name, value in data.items()}, epochs, count


def test_pass_0_is_the_pipelines_own_masks(exported):
    data, epochs, count = exported
    own = [batch for epoch in epochs for batch in epoch][:count]
    assert data["masked_positions"].shape == (3, sum(len(b[0]) for b in own), 4)
    features, labels, weights = accelerator.masked_batch(data, 0, np.arange(len(data["nsp"])))
    for name, column in (("token_ids", 0), ("masked_positions", 1), ("segment_ids", 2)):
        np.testing.assert_array_equal(features[name], np.concatenate([b[column] for b in own]))
    np.testing.assert_array_equal(labels["mlm"], np.concatenate([b[3] for b in own]))
    np.testing.assert_array_equal(labels["nsp"], np.concatenate([b[4] for b in own]))
    np.testing.assert_array_equal(weights["mlm"], np.concatenate([b[5] for b in own]))
    np.testing.assert_array_equal(features["padding_mask"], features["token_ids"] != 0)


def test_later_passes_are_new_masks_of_the_same_pairs(exported, preprocessor):
    data, epochs, _ = exported
    rows = np.arange(len(data["nsp"]))
    passes = [accelerator.masked_batch(data, number, rows) for number in range(3)]
    targets_per_pair = [(weights["mlm"] > 0).sum(1) for _, _, weights in passes]
    np.testing.assert_array_equal(targets_per_pair[1], targets_per_pair[0])  # the budget depends on the pair only
    for features, labels, _ in passes[1:]:
        assert np.mean((features["masked_positions"] != passes[0][0]["masked_positions"]).any(1)) > 0.8
        unmasked = accelerator.original_tokens(features["token_ids"], features["masked_positions"], labels["mlm"])
        np.testing.assert_array_equal(unmasked, data["tokens"])
    # Pass 1 of the pairs of pipeline epoch 0 is the rule at epoch 0 + 1 * 3 epochs (the pairs span 3 epochs).
    mask = masked_lm_rule(preprocessor, max_predictions=4)
    first = len(epochs[0][0][0])
    expected = mask(data["tokens"][:first], 5, 3, 0)
    np.testing.assert_array_equal(passes[1][0]["token_ids"][:first], expected[0])
    np.testing.assert_array_equal(passes[1][0]["masked_positions"][:first], expected[1])


def test_epochs_cycle_the_passes_in_new_orders(exported):
    data, _, _ = exported
    batches = accelerator.StaticMaskedPairs(data, batch_size=32, seed=1)
    assert len(batches) == len(data["nsp"]) // 32
    seen = []
    for epoch in range(4):
        features, labels, _ = batches[0]
        rows = batches.order[:32]
        expected = accelerator.masked_batch(data, epoch % 3, rows)[0]
        np.testing.assert_array_equal(features["token_ids"], expected["token_ids"])
        seen.append(rows)
        batches.on_epoch_end()
    assert not np.array_equal(seen[0], seen[3])  # pass 0 again, in another order
    np.testing.assert_array_equal(np.sort(batches.order), np.arange(len(data["nsp"])))


def test_the_export_refuses_more_than_its_bound(tmp_path):
    files = {"train.npz": bytes(600_000), "valid.npz": bytes(100_000)}
    with pytest.raises(ValueError, match=r"0.67 MiB \(train.npz 0.57 MiB, valid.npz 0.10 MiB\), over --max-mib 0.5"):
        accelerator.write_bounded(tmp_path / "shards", files, 0.5)
    assert not (tmp_path / "shards").exists()
    accelerator.write_bounded(tmp_path / "shards", files, 0.7)
    assert sorted(path.name for path in (tmp_path / "shards").iterdir()) == ["train.npz", "valid.npz"]
    for passes, train_batches in ((0, None), (16, 0)):
        with pytest.raises(ValueError, match=f"--passes {passes}, --max-mib 16, --train-batches {train_batches} "):
            accelerator.export(tmp_path / "other", train_batches, 1, passes, 16)


@pytest.mark.slow  # a few minutes on the CI machine: three processes, a bert_mini trained for 30 s; `make test-slow`
def test_export_train_under_jax_and_import(tmp_path):
    shards, weights, run_folder = tmp_path / "shards", tmp_path / "out", tmp_path / "run"
    printed = run([str(SCRIPT), "export", "--output", str(shards), "--train-batches", "4", "--validation-batches",
                   "1", "--passes", "2"], "tensorflow")
    assert "128 pairs (4 batches from 1 pipeline epoch(s)), 2 pass(es) of masks" in printed
    assert {path.name for path in shards.iterdir()} == {"train.npz", "valid.npz", "config.json"}
    without_tensorflow = WITHOUT_TENSORFLOW.replace("benchmarks/gpu_jax.py", str(SCRIPT))
    printed = run(["train", "--shards", str(shards), "--output", str(weights), "--minutes", "1.5", "--batch-size",
                   "8"], "jax", prefix=("-c", without_tensorflow))
    assert "2 passes of masks, " in printed and "backend jax" in printed
    summary = json.loads((weights / "accelerator_run.json").read_text())
    assert summary["backend"] == "jax" and summary["steps_per_epoch"] == 16 and summary["steps_run"] > 0
    run([str(SCRIPT), "import", "--shards", str(shards), "--weights", str(weights), "--output", str(run_folder)],
        "tensorflow")
    scores = json.loads((run_folder / "scores.json").read_text())
    assert abs(scores["val_mlm_loss"] - summary["val_mlm_loss"]) < 1e-3 and (run_folder / "backbone.keras").is_file()
