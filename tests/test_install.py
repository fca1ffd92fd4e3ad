"""kzoo installed as users install it: a wheel built from this tree (`pip wheel`), installed with pip into a fresh
virtual environment, and used from a folder outside the checkout.

The fresh environment takes kzoo's dependencies from the environment running the tests (a .pth file lists its
site-packages; the .pth files inside that folder, such as an editable install's finder, are not run), so nothing is
downloaded; kzoo itself comes only from the wheel, which `kzoo.__file__` shows.
"""

import configparser
import json
import os
import pathlib
import shutil
import site
import subprocess
import sys
import zipfile

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
SHIPPED_TREES = ("data", "saved_models/transformer_multi30k_en_de")  # setup.cfg's package data
# Flags that make `python -m kzoo.demo` finish in seconds (a tiny training budget). Empty until the demo has them;
# then test_installed_demo_runs runs the demo from the wheel.
# make demo's job, on a smoke budget: 300 training pairs, epochs of 5 steps (training stops after the first, past 3
# seconds), validation and its greedy BLEU on 20 val pairs.
DEMO_TINY_BUDGET = ("--minutes", "0.05", "--train-pairs", "300", "--steps-per-epoch", "5", "--val-pairs", "20")

CHECKS = r"""
import json, pathlib, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the tf-text ops the shipped translator's graph uses)
import kzoo, kzoo.data

report = {"kzoo": kzoo.__file__, "shipped_vocabulary": str(kzoo.data.shipped_file("wikitext2/vocab.txt"))}
report["multi30k"] = {split: [len(side) for side in kzoo.data.multi30k(split)]
                      for split in ("train", "val", "test_2016_flickr")}
report["glue"] = {f"{task} {split}": len(kzoo.data.glue(task, split).labels)
                  for task in ("sst2", "mrpc") for split in ("train", "dev")}
report["wikitext2"] = {split: sum(1 for _ in kzoo.data.wikitext_documents(kzoo.data.wikitext2_file(split)))
                       for split in ("train", "valid")}
report["vocabulary"] = len(kzoo.data.resolve_data_path(kzoo.data.WIKITEXT2_VOCABULARY).read_text().splitlines())
model = kzoo.data.shipped_model("transformer_multi30k_en_de")
newest = max((version for version in model.iterdir() if version.name.isdigit()), key=lambda v: int(v.name))
serve = tf.saved_model.load(str(newest)).signatures["serving_default"]
report["translator"] = str(newest)
report["translation"] = serve(text=tf.constant(["A dog runs on the beach."]))["translation"].numpy()[0].decode()
print(json.dumps(report))
"""


def setup_cfg():
    config = configparser.ConfigParser()
    config.read(REPOSITORY / "setup.cfg")
    return config


def test_setup_cfg_lists_every_package_of_kzoo():
    listed = set(setup_cfg()["options"]["packages"].split())
    found = {".".join(path.parent.relative_to(REPOSITORY).parts) for path in (REPOSITORY / "kzoo").rglob("__init__.py")}
    shipped = {f"kzoo._shipped.{pathlib.Path(tree).parts[0]}" for tree in SHIPPED_TREES}
    expected = found | shipped
    assert listed == expected, f"setup.cfg packages: add {sorted(expected - listed)}, drop {sorted(listed - expected)}"


def source_tree(destination):
    """What `pip wheel .` reads: the top-level files, kzoo/ and the shipped files (no runs, no virtual env)."""
    destination.mkdir()
    for path in REPOSITORY.iterdir():
        if path.is_file():
            shutil.copy2(path, destination / path.name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for tree in ("kzoo", *SHIPPED_TREES):
        shutil.copytree(REPOSITORY / tree, destination / tree, ignore=ignore)
    return destination


def run(command, **kwargs):
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    root = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", root / "dist",
         source_tree(root / "source")])
    (built,) = (root / "dist").glob("kzoo-*.whl")
    return built


@pytest.fixture(scope="module")
def environment(wheel, tmp_path_factory):
    """(python of a fresh virtual environment holding kzoo from the wheel, a folder outside the checkout, env)."""
    root = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--without-pip", root / "venv"])
    python = root / "venv" / "bin" / "python"
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip()
    (pathlib.Path(purelib) / "kzoo-test-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    env = {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "VIRTUAL_ENV")}
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", wheel], cwd=elsewhere, env=env)
    return python, elsewhere, env


def test_the_wheel_holds_every_module_and_every_shipped_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {path.relative_to(REPOSITORY).as_posix() for path in (REPOSITORY / "kzoo").rglob("*.py")}
    shipped = {
        f"kzoo/_shipped/{path.relative_to(REPOSITORY).as_posix()}"
        for tree in SHIPPED_TREES for path in (REPOSITORY / tree).rglob("*")
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(REPOSITORY).parts)
    }
    assert "kzoo/_shipped/data/wikitext2/vocab.txt" in shipped
    assert modules <= names and shipped <= names, sorted((modules | shipped) - names)


def test_installed_kzoo_finds_its_data_and_translator_from_another_folder(environment):
    python, elsewhere, env = environment
    report = json.loads(run([python, "-c", CHECKS], cwd=elsewhere, env=env).stdout.strip().splitlines()[-1])
    prefix = str(python.parent.parent)
    assert report["kzoo"].startswith(prefix), report["kzoo"]  # kzoo from the wheel, not the checkout
    assert report["shipped_vocabulary"].startswith(prefix) and report["translator"].startswith(prefix)
    assert report["multi30k"] == {"train": [29000, 29000], "val": [1014, 1014], "test_2016_flickr": [1000, 1000]}
    assert report["glue"] == {"sst2 train": 67349, "sst2 dev": 872, "mrpc train": 3668, "mrpc dev": 408}
    assert report["wikitext2"] == {"train": 600, "valid": 60}
    assert report["vocabulary"] == 8192
    assert "Hund" in report["translation"], report["translation"]


@pytest.mark.parametrize("module", ["kzoo.demo", "kzoo.train.translation_recipe"])
def test_installed_commands_answer_help(environment, module):
    python, elsewhere, env = environment
    assert "usage:" in run([python, "-m", module, "--help"], cwd=elsewhere, env=env).stdout


def test_installed_demo_runs(environment):
    python, elsewhere, env = environment
    result = run([python, "-m", "kzoo.demo", "--output", elsewhere / "demo", *DEMO_TINY_BUDGET], cwd=elsewhere,
                 env=env)
    assert "same translations as in this process: True" in result.stdout
    assert "the shipped model" in result.stdout  # found the shipped translator in the installed package
    assert (elsewhere / "demo" / "run.json").is_file()
    assert "trained 1 × 5 steps" in result.stdout and "20 validation pairs" in result.stdout  # the smoke budget held


def test_demo_refuses_a_bad_budget(capsys):
    from kzoo.demo import main

    for flags in (["--val-pairs", "-1"], ["--steps-per-epoch", "0"]):
        with pytest.raises(SystemExit):
            main(["--output", "unused", *flags])
        assert "--steps-per-epoch" in capsys.readouterr().err
