"""Execute the recipe notebooks top to bottom and write them back with their outputs, so that a reader on GitHub
sees a real (short) run's results and plots.

    make notebooks                                             # every notebook, the budgets below
    .venv/bin/python recipes/execute_notebooks.py translation_en_de.ipynb

The budgets are a few minutes per notebook (ten for the translator, with the demo's shorter warm-up) on 2 CPU cores: enough for the curves to move and the printed scores to
mean something, far from the full runs whose numbers README and the model cards quote (each notebook's first cell
gives those defaults). The runs go to runs/notebooks/<notebook>/; bert_finetuning.ipynb reads the backbone that
bert_pretraining.ipynb trained just before it. CI executes the same notebooks with tiny budgets instead
(tests/recipes/test_notebooks.py) and checks that they run, not what they print.
"""

import argparse
import os
import pathlib
import sys
import time

RECIPES = pathlib.Path(__file__).resolve().parent
RUNS = RECIPES.parent / "runs" / "notebooks"

# In the order they run: the fine-tuning notebook starts from the pretraining notebook's backbone.
READER_BUDGETS = {
    "translation_en_de.ipynb": {"KZOO_RECIPE_MINUTES": "10", "KZOO_RECIPE_WARMUP_STEPS": "400",
                                "KZOO_RECIPE_STEPS_PER_EPOCH": "100", "KZOO_RECIPE_EVAL_SENTENCES": "200"},
    "bert_pretraining.ipynb": {"KZOO_RECIPE_MINUTES": "4", "KZOO_RECIPE_TRAIN_STEPS": "600",
                               "KZOO_RECIPE_STEPS_PER_EPOCH": "25", "KZOO_RECIPE_VALIDATION_BATCHES": "5"},
    "bert_finetuning.ipynb": {"KZOO_RECIPE_SST2_STEPS": "200", "KZOO_RECIPE_MRPC_STEPS": "100",
                              "KZOO_RECIPE_BACKBONE": "runs/notebooks/bert_pretraining/backbone.keras"},
    "pretrained_bert.ipynb": {"KZOO_RECIPE_SST2_STEPS": "120", "KZOO_RECIPE_MRPC_STEPS": "60",
                              "KZOO_RECIPE_TRAIN_EXAMPLES": "4000", "KZOO_RECIPE_DEV_EXAMPLES": "400"},
    "serving.ipynb": {"KZOO_RECIPE_SST2_STEPS": "120", "KZOO_RECIPE_TRAIN_EXAMPLES": "4000"},
}


def execute(name, budget):
    """Run recipes/NAME with `budget` (environment variables) and write it back with its outputs."""
    import nbformat
    from nbclient import NotebookClient

    output = RUNS / pathlib.Path(name).stem
    if output.exists():
        raise SystemExit(f"{output} exists from an earlier execution: move it away or delete it first.")
    os.environ.update({**budget, "KZOO_RECIPE_OUTPUT": str(output.relative_to(RECIPES.parent))})  # as a reader would type it
    path = RECIPES / name
    notebook = nbformat.read(path, as_version=4)
    started = time.monotonic()
    NotebookClient(notebook, timeout=3600, kernel_name="python3",
                   resources={"metadata": {"path": str(RECIPES.parent)}}).execute()
    errors = [o for cell in notebook.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        raise SystemExit(f"{name} failed: {errors[0].get('ename')}: {errors[0].get('evalue')}")
    temporary = path.with_name(f".{path.name}.partial")
    nbformat.write(notebook, temporary)
    temporary.replace(path)
    print(f"{name}: {(time.monotonic() - started) / 60:.1f} min, outputs written", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python recipes/execute_notebooks.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NOTEBOOK",
                        help=f"notebooks to execute (default: all, in this order: {', '.join(READER_BUDGETS)})")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in READER_BUDGETS]
    if unknown:
        parser.error(f"no recipe notebook named {', '.join(unknown)}; the notebooks: {', '.join(READER_BUDGETS)}")
    for name in args.names or READER_BUDGETS:
        execute(name, READER_BUDGETS[name])


if __name__ == "__main__":
    sys.exit(main())
