"""Parallel text: aligned source and target files, one sentence per line, plain or gzip."""

import gzip
import hashlib
import pathlib

from kzoo.data.shipped import shipped_file

# kzoo ships Multi30k Task 1 as shipped_file("multi30k") (see data/multi30k/SOURCE.md); sha256 of each shipped file.
MULTI30K_SPLITS = ("train", "val", "test_2016_flickr")
MULTI30K_SHA256 = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
}


def read_lines(path):
    """The lines of a UTF-8 text file (gzip if the name ends in .gz), without their line endings.

    Example:
    ```python
    import pathlib

    pathlib.Path("sentences.txt").write_bytes("A dog runs.\\r\\nZwei Hunde.\\n".encode("utf-8"))
    assert kzoo.data.read_lines("sentences.txt") == ["A dog runs.", "Zwei Hunde."]
    ```
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: pass the path of a UTF-8 text file, one sentence per line.")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as handle:
        return [line.rstrip("\r\n") for line in handle]


def read_parallel(source_path, target_path):
    """Aligned (source, target) sentence lists from two files; they must have the same number of lines.

    Example:
    ```python
    import pathlib

    pathlib.Path("train.en").write_text("Hello.\\nTwo dogs.\\n", encoding="utf-8")
    pathlib.Path("train.de").write_text("Hallo.\\nZwei Hunde.\\n", encoding="utf-8")
    sources, targets = kzoo.data.read_parallel("train.en", "train.de")
    assert (sources, targets) == (["Hello.", "Two dogs."], ["Hallo.", "Zwei Hunde."])
    ```
    """
    sources, targets = read_lines(source_path), read_lines(target_path)
    if len(sources) != len(targets):
        raise ValueError(
            f"{source_path} has {len(sources)} lines but {target_path} has {len(targets)}: parallel files must align "
            "line by line."
        )
    return sources, targets


def multi30k_files(split, data_dir=None, source="en", target="de"):
    """The (source, target) file paths of a Multi30k split, checked against their published sha256.

    Example:
    ```python
    from kzoo.data.parallel_text import multi30k_files

    english, german = multi30k_files("val")  # the shipped copy; data_dir= for your own Multi30k files
    assert (english.name, german.name) == ("val.en.gz", "val.de.gz")
    ```
    """
    if split not in MULTI30K_SPLITS:
        raise ValueError(f"split={split!r} is not a Multi30k split; use one of {MULTI30K_SPLITS}.")
    data_dir = pathlib.Path(data_dir) if data_dir else shipped_file("multi30k")
    paths = []
    for language in (source, target):
        path = data_dir / f"{split}.{language}.gz"
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} is missing: put the Multi30k Task 1 raw files (multi30k/dataset, data/task1/raw) in "
                f"{data_dir}, or pass data_dir=."
            )
        expected = MULTI30K_SHA256.get(path.name)
        if expected and hashlib.sha256(path.read_bytes()).hexdigest() != expected:
            raise ValueError(f"{path} does not have the sha256 of the published file ({expected}); fetch it again.")
        paths.append(path)
    return tuple(paths)


def multi30k(split, data_dir=None, source="en", target="de"):
    """Multi30k Task 1 sentence pairs of one split, as (source sentences, target sentences).

    Args:
        split: str. `"train"` (29,000 pairs), `"val"` (1,014) or `"test_2016_flickr"` (1,000).
        data_dir: path. A folder holding `<split>.<language>.gz` files; defaults to the copy kzoo ships
            (`shipped_file("multi30k")`).
        source, target: str. The languages, "en" and "de" by default (the shipped copy holds only these).

    Example:
    ```python
    english, german = kzoo.data.multi30k("test_2016_flickr")
    assert len(english) == len(german) == 1000
    print(english[0], "->", german[0])
    ```
    """
    return read_parallel(*multi30k_files(split, data_dir, source, target))
