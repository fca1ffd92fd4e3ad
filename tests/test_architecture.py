"""The package order README's architecture section states, checked on every import in kzoo/ (module level and
inside functions alike): a module imports only from its own package and from packages of lower layers."""

import ast
import pathlib
import sys

import pytest

KZOO = pathlib.Path(__file__).resolve().parents[1] / "kzoo"
BENCHMARKS = KZOO.parent / "benchmarks"

# Lowest first. Packages of one layer do not import each other.
LAYERS = (
    ("_lazy", "_version", "console", "files"),  # helpers on the standard library alone
    ("layers", "metrics", "data", "serving"),  # Keras + numpy; the standard library; the serving contract check
    ("checkpoints",),  # numpy (TensorFlow's checkpoint reader only when a Google checkpoint is read)
    ("text",),  # TensorFlow, tensorflow-text, keras-hub
    ("models", "decoding"),  # Keras + numpy at import (text only inside the raw-text front doors); TensorFlow ops
    ("translator",),
    ("train",),
    ("export",),
    ("demo",),
)
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}
# What the backend-free core may import at module level, beside the standard library and lower kzoo packages.
BACKEND_FREE = {"layers", "metrics", "checkpoints", "models"}
BACKEND_FREE_LIBRARIES = {"keras", "numpy", "ml_dtypes"}


def package_of(module):
    """`kzoo.layers.attention` -> "layers"; `kzoo` itself -> None (the top, which may import anything)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def module_name(path):
    relative = path.relative_to(KZOO.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def imports(path):
    """(imported module, line, at module level) for every import statement in the file."""
    tree = ast.parse(path.read_text(), str(path))
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, id(node) in top_level) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.append((node.module, node.lineno, id(node) in top_level))
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"{path}:{node.lineno}: use absolute imports (from kzoo.x import y)")
    return found


MODULES = sorted(KZOO.rglob("*.py"))


def test_every_package_has_a_layer():
    packages = {package_of(module_name(path)) for path in MODULES} - {None}
    assert packages == set(RANK), f"packages without a layer in LAYERS: {packages - set(RANK)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(KZOO.parent)))
def test_imports_follow_the_layers(path):
    here = package_of(module_name(path))
    if here is None:
        return
    wrong = []
    for imported, line, at_top in imports(path):
        if imported == "kzoo":
            wrong.append(f"line {line}: imports kzoo itself")
        elif imported.startswith("kzoo."):
            there = package_of(imported)
            if there != here and RANK[there] >= RANK[here]:
                wrong.append(f"line {line}: {imported} (layer {RANK[there]}) from {here} (layer {RANK[here]})")
        elif here in BACKEND_FREE and at_top:
            library = imported.split(".")[0]
            if library not in sys.stdlib_module_names and library not in BACKEND_FREE_LIBRARIES:
                wrong.append(f"line {line}: {imported} at import time in the backend-free {here}")
    assert not wrong, "\n".join(wrong)


def test_recipes_import_library_code_never_each_other():
    recipes = {module_name(path) for path in MODULES if path.name.endswith("_recipe.py")}
    assert recipes
    for path in MODULES:
        if path.name.endswith("_recipe.py"):
            others = {name for name, _, _ in imports(path)} & (recipes - {module_name(path)})
            assert not others, f"{path.name} imports {others}"


def test_benchmarks_import_kzoo_as_it_is():
    for path in sorted(BENCHMARKS.glob("*.py")):
        assert "sys.modules[" not in path.read_text(), f"{path.name} swaps modules in sys.modules"
