"""CI runs every recipe notebook top to bottom with a tiny budget, so the recipes never rot."""

import os
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

RECIPES = pathlib.Path(__file__).resolve().parents[2] / "recipes"
TINY_BUDGETS = {
    "translation_en_de.ipynb": {
        "KZOO_RECIPE_MINUTES": "0.2",
        "KZOO_RECIPE_TRAIN_PAIRS": "1500",
        "KZOO_RECIPE_EVAL_SENTENCES": "8",
    },
}


@pytest.mark.parametrize("name", sorted(TINY_BUDGETS))
def test_recipe_runs_top_to_bottom(name, tmp_path, monkeypatch):
    for key, value in {**TINY_BUDGETS[name], "KZOO_RECIPE_OUTPUT": str(tmp_path / "run")}.items():
        monkeypatch.setenv(key, value)
    notebook = nbformat.read(RECIPES / name, as_version=4)
    NotebookClient(notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "test_2016_flickr   beam" in text and "saved_model/1" in text
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 2  # training curves and the attention map


def test_every_recipe_has_a_tiny_budget():
    assert sorted(p.name for p in RECIPES.glob("*.ipynb")) == sorted(TINY_BUDGETS)
