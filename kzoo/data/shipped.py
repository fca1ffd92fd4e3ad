"""Where the files kzoo ships are, in a checkout and when installed.

The corpora (the repository's data/ folder: Multi30k, GLUE SST-2 and MRPC, WikiText-2 and its vocabulary) and the
shipped translator (saved_models/transformer_multi30k_en_de) are package data: `pip install kzoo` puts them in
site-packages/kzoo/_shipped/{data,saved_models}; in a checkout (and an editable install) they are the repository's
own data/ and saved_models/ folders beside kzoo/. Run folders record a shipped file by its name,
`"kzoo:wikitext2/vocab.txt"`, never by where this machine keeps it; `resolve_data_path` turns it back into a path.
"""

import pathlib

PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1]
INSTALLED_DIR = PACKAGE_DIR / "_shipped"  # where setup.cfg's package_dir puts data/ and saved_models/ in a wheel
SHIPPED_DIR = INSTALLED_DIR if INSTALLED_DIR.is_dir() else PACKAGE_DIR.parent
SHIPPED_DATA_DIR = SHIPPED_DIR / "data"
SHIPPED_MODELS_DIR = SHIPPED_DIR / "saved_models"
SHIPPED_PREFIX = "kzoo:"


def _shipped(root, name, kind):
    relative = pathlib.PurePosixPath(name)
    if not name or relative.is_absolute() or ".." in relative.parts:
        example = "wikitext2/vocab.txt" if kind == "file" else "transformer_multi30k_en_de"
        raise ValueError(f"shipped {kind} name {name!r} must be a relative path inside {root}, such as {example!r}.")
    if not root.is_dir():
        raise FileNotFoundError(
            f"{root} is missing, so kzoo's shipped files cannot be found: install kzoo with its package data "
            "(pip install . from a checkout, or its wheel), or pass your own path instead."
        )
    path = root.joinpath(*relative.parts)
    if not path.exists():
        folder = next(parent for parent in path.parents if parent.is_dir())
        there = sorted(item.name for item in folder.iterdir() if not item.name.startswith("."))
        raise FileNotFoundError(f"kzoo ships no {kind} {name!r}: {path} does not exist ({folder} holds {there}).")
    return path


def shipped_file(name):
    """The path of a file or folder kzoo ships, by its name inside the repository's data/ folder.

    Args:
        name: str. A relative path such as `"wikitext2/vocab.txt"`, `"multi30k"` or `"glue/SST-2/dev.tsv.gz"`.

    Returns:
        A `pathlib.Path`, which exists; a name kzoo does not ship is an error listing what it does.

    Example:
    ```python
    vocabulary = kzoo.data.shipped_file("wikitext2/vocab.txt")
    assert vocabulary.read_text().splitlines()[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert kzoo.data.shipped_file("multi30k").is_dir()
    ```
    """
    return _shipped(SHIPPED_DATA_DIR, name, "file")


def shipped_model(name):
    """The folder of a SavedModel kzoo ships, holding its numbered versions and its model card (README.md).

    TF Serving serves the folder (its newest version); in Python, `tf.saved_model.load` loads a version once
    `tensorflow_text` is imported (the graph uses its ops).

    Args:
        name: str. The model's folder name inside the repository's saved_models/, e.g.
            `"transformer_multi30k_en_de"`.

    Example:
    ```python
    folder = kzoo.data.shipped_model("transformer_multi30k_en_de")
    newest = max(int(version.name) for version in folder.iterdir() if version.name.isdigit())
    assert (folder / "README.md").is_file() and (folder / str(newest) / "saved_model.pb").is_file()
    ```
    """
    return _shipped(SHIPPED_MODELS_DIR, name, "model")


def resolve_data_path(value):
    """The path a recorded data setting names: `"kzoo:NAME"` is the shipped file `NAME` (see `shipped_file`);
    anything else is a path of the user's, returned as given (relative paths stay relative to the working folder).

    Recipes record `"kzoo:wikitext2/vocab.txt"` in a run's config.json rather than this machine's absolute path,
    and call `resolve_data_path` where they open the file, so a run folder means the same on every machine.

    Example:
    ```python
    assert kzoo.data.resolve_data_path("kzoo:wikitext2/vocab.txt") == kzoo.data.shipped_file("wikitext2/vocab.txt")
    assert str(kzoo.data.resolve_data_path("my_corpus/vocab.txt")) == "my_corpus/vocab.txt"
    ```
    """
    value = str(value)
    if value.startswith(SHIPPED_PREFIX):
        return shipped_file(value[len(SHIPPED_PREFIX):])
    return pathlib.Path(value)
