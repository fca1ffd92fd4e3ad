"""Google's published BERT checkpoints, by name, downloaded once into a local cache.

`RELEASES` lists the archives of google-research/bert: the 24 compact models of Turc et al. (2019), released
2020-03-11 (`uncased_L-{2,4,6,8,10,12}_H-{128,256,512,768}_A-{H/64}`), and the original BERT-Base and BERT-Large
(uncased and cased, 2018-10-18), whole-word-masking BERT-Large (2019-05-30), multilingual cased (2018-11-23) and
Chinese (2018-11-03) models. A name such as "uncased_L-4_H-512_A-8" (BERT-Small) selects one. The compact grid holds
a re-trained BERT-Base under the same name as the original: "uncased_L-12_H-768_A-12" is the 2018 original, and
"2020_02_20/uncased_L-12_H-768_A-12" the re-trained one (every release answers to "<date>/<name>").

`fetch(name)` downloads `https://storage.googleapis.com/bert_models/<date>/<name>.zip` once and unzips it into
`<cache>/bert_models/<date>/<name>/`, where `<cache>` is `$KZOO_CACHE_DIR` or `~/.cache/kzoo`. The archive is
written to a temporary file beside the cache folder, verified, unzipped into a temporary folder, and only then
renamed into place: an interrupted or failed download leaves no folder that could be taken for a whole checkpoint.

What is verified: the archive's SHA-256 when `Release.sha256` is known (Google publishes none, so the entries here
have none); otherwise that the file is a zip archive whose every member passes its CRC-32 check (which catches
truncated and corrupted downloads), that it holds `bert_config.json`, `vocab.txt` and a `bert_model.ckpt`
checkpoint (index and data), that no member would unzip outside its folder, and that the configuration has the
number of layers, width and heads the name promises. The tensors' shapes are then checked against the
configuration when the checkpoint is loaded (`kzoo.checkpoints.bert_checkpoint`).

Example:
```python
folder = kzoo.checkpoints.bert_releases.fetch("uncased_L-4_H-512_A-8")
backbone = kzoo.models.bert_small(weights="uncased_L-4_H-512_A-8")  # the same, loaded
```

References:
    - [google-research/bert](https://github.com/google-research/bert), README.
    - [Turc et al., 2019](https://arxiv.org/abs/1908.08962): the compact models.
"""

import dataclasses
import hashlib
import http.client
import json
import os
import pathlib
import re
import shutil
import tempfile
import urllib.request
import zipfile

import keras

BASE_URL = "https://storage.googleapis.com/bert_models"
_SIZES = re.compile(r"_L-(\d+)_H-(\d+)_A-(\d+)$")
_REQUIRED = ("bert_config.json", "vocab.txt", "bert_model.ckpt.index")
# Files that make a folder a checkpoint (its configuration, or weights without which config.json is named missing).
_CHECKPOINT_FILES = ("bert_config.json", "config.json", "model.safetensors", "pytorch_model.bin")


@dataclasses.dataclass(frozen=True)
class Release:
    """One published archive: `<BASE_URL>/<date>/<name>.zip`, with the sizes its name states.

    Args:
        date: str. The folder of the release on Google's bucket, e.g. "2020_02_20".
        name: str. The archive's name without ".zip", e.g. "uncased_L-4_H-512_A-8".
        sha256: str, optional. The archive's SHA-256, checked after download when given.
    """

    date: str
    name: str
    sha256: str | None = None

    @property
    def url(self):
        return f"{BASE_URL}/{self.date}/{self.name}.zip"

    @property
    def sizes(self):
        """`{"num_layers": L, "hidden_dim": H, "num_heads": A}` from the name."""
        numbers = _SIZES.search(self.name).groups()
        return dict(zip(("num_layers", "hidden_dim", "num_heads"), map(int, numbers)))

    @property
    def folder(self):
        """Where the unzipped checkpoint lies: `<cache>/bert_models/<date>/<name>`, `<cache>` from `cache_dir()`."""
        return cache_dir() / "bert_models" / self.date / self.name


def _releases():
    compact = [
        Release("2020_02_20", f"uncased_L-{layers}_H-{hidden}_A-{hidden // 64}")
        for layers in (2, 4, 6, 8, 10, 12)
        for hidden in (128, 256, 512, 768)
    ]
    original = [
        Release("2018_10_18", name)
        for name in ("uncased_L-12_H-768_A-12", "cased_L-12_H-768_A-12", "uncased_L-24_H-1024_A-16",
                     "cased_L-24_H-1024_A-16")
    ]
    others = [
        Release("2019_05_30", "wwm_uncased_L-24_H-1024_A-16"),
        Release("2019_05_30", "wwm_cased_L-24_H-1024_A-16"),
        Release("2018_11_23", "multi_cased_L-12_H-768_A-12"),
        Release("2018_11_03", "chinese_L-12_H-768_A-12"),
    ]
    releases = {f"{r.date}/{r.name}": r for r in compact + original + others}
    # Bare names; the original BERT-Base wins the one name the compact grid shares with it.
    releases.update({r.name: r for r in compact})
    releases.update({r.name: r for r in original + others})
    return releases


RELEASES = _releases()


def cache_dir():
    """`$KZOO_CACHE_DIR`, or `~/.cache/kzoo` when it is not set."""
    return pathlib.Path(os.environ.get("KZOO_CACHE_DIR") or pathlib.Path.home() / ".cache" / "kzoo")


def find_release(name):
    """The `Release` called `name` ("uncased_L-4_H-512_A-8" or "2020_02_20/uncased_L-4_H-512_A-8"), or None."""
    return RELEASES.get(str(name))


def resolve(weights):
    """A local checkpoint folder for `weights`: an existing path as it is, a release name fetched into the cache."""
    path = pathlib.Path(weights).expanduser()
    if path.exists():
        return path
    release = find_release(weights)
    if release is None:
        names = sorted(name for name in RELEASES if "/" not in name)
        raise FileNotFoundError(
            f"weights={str(weights)!r} is neither an existing checkpoint folder nor a published BERT release. "
            f"Pass the folder of a Hugging Face or Google checkpoint, or one of: {', '.join(names)}."
        )
    return fetch(release)


def checkpoint_folder(weights):
    """The folder holding a checkpoint's files (config.json or bert_config.json) for `weights`: a folder, the
    folder's one subfolder (as some zips unpack), or a release name fetched into the cache."""
    path = resolve(weights)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a folder; pass the folder that holds the checkpoint's files.")

    def is_checkpoint(folder):  # a configuration or weights: a folder with weights but no config.json is refused
        return any((folder / name).is_file() for name in _CHECKPOINT_FILES) or any(folder.glob("*.ckpt*.index"))

    if is_checkpoint(path):
        return path
    subfolders = [p for p in path.iterdir() if p.is_dir()]
    if len(subfolders) == 1 and is_checkpoint(subfolders[0]):
        return subfolders[0]
    raise FileNotFoundError(
        f"{path} holds no BERT checkpoint: expected config.json with model.safetensors or pytorch_model.bin "
        f"(Hugging Face), or bert_config.json with bert_model.ckpt.* (Google); found "
        f"{', '.join(sorted(p.name for p in path.iterdir())) or 'nothing'}."
    )


def fetch(release):
    """The folder of the unzipped `release` (a `Release` or its name), downloaded and verified on first use."""
    if not isinstance(release, Release):
        name, release = release, find_release(release)
        if release is None:
            raise ValueError(f"No published BERT release is called {name!r}; see "
                             "kzoo.checkpoints.bert_releases.RELEASES.")
    folder = release.folder
    if (folder / "bert_config.json").is_file():
        return folder
    if folder.exists() and any(folder.iterdir()):
        raise FileExistsError(
            f"{folder} exists but holds no bert_config.json, so it is not a whole checkpoint. Remove the folder to "
            f"download {release.url} again, or unzip that archive so that {folder / 'bert_config.json'} exists."
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    archive = _download(release, folder)
    try:
        _verify(release, archive)
        _unzip(archive, folder)
    finally:
        archive.unlink()
    return folder


def _download(release, folder):
    descriptor, temporary = tempfile.mkstemp(prefix=f".{release.name}.", suffix=".zip.part", dir=folder.parent)
    temporary = pathlib.Path(temporary)
    try:
        with os.fdopen(descriptor, "wb") as file, urllib.request.urlopen(release.url, timeout=60) as response:
            total = int(response.headers.get("Content-Length") or 0) or None
            progress = keras.utils.Progbar(total, unit_name="byte") if total else None
            while chunk := response.read(1 << 20):
                file.write(chunk)
                if progress:
                    progress.add(len(chunk))
    except (OSError, http.client.HTTPException) as error:  # urllib.error.URLError is an OSError
        temporary.unlink()
        raise OSError(
            f"Could not download {release.url} ({error}). Download that file where the internet is reachable and "
            f"unzip it so that its files (bert_config.json, vocab.txt, bert_model.ckpt.*) lie directly in {folder}, "
            "or pass the unzipped folder itself as weights=."
        ) from error
    except BaseException:
        temporary.unlink()
        raise
    return temporary


def _verify(release, archive):
    if release.sha256:
        digest = hashlib.sha256()
        with open(archive, "rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
        if digest.hexdigest() != release.sha256:
            raise ValueError(
                f"{release.url} has SHA-256 {digest.hexdigest()}, not the published {release.sha256}: the download "
                "is corrupted or the file was changed. Nothing was cached; try again."
            )
    try:
        with zipfile.ZipFile(archive) as zip_file:
            broken = zip_file.testzip()
            members = zip_file.namelist()
            config_member = next((m for m in members if pathlib.PurePosixPath(m).name == "bert_config.json"), None)
            config_text = zip_file.read(config_member) if config_member else None
    except (zipfile.BadZipFile, EOFError, OSError) as error:
        raise ValueError(f"{release.url} did not download as a whole zip archive ({error}). Nothing was cached; "
                         "try again.") from error
    if broken is not None:
        raise ValueError(f"{release.url}: the member {broken} fails its CRC check. Nothing was cached; try again.")
    root = config_member[: -len("bert_config.json")] if config_member else ""
    missing = [name for name in _REQUIRED if root + name not in members]
    if not any(m.startswith(root + "bert_model.ckpt.data-") for m in members):
        missing.append("bert_model.ckpt.data-*")
    if missing:
        raise ValueError(f"{release.url} lacks {', '.join(missing)} (it holds {', '.join(members)}): it is not a "
                         "BERT checkpoint archive. Nothing was cached.")
    unsafe = [m for m in members if m.startswith("/") or ".." in pathlib.PurePosixPath(m).parts]
    if unsafe:
        raise ValueError(f"{release.url} has members that would unzip outside their folder: {unsafe}.")
    try:
        config = json.loads(config_text)
    except ValueError as error:
        raise ValueError(f"{release.url}: {config_member} is not JSON ({error}). Nothing was cached.") from error
    found = {"num_layers": config.get("num_hidden_layers"), "hidden_dim": config.get("hidden_size"),
             "num_heads": config.get("num_attention_heads")}
    if found != release.sizes:
        raise ValueError(f"{release.url}: bert_config.json describes {found}, but the name promises {release.sizes}. "
                         "Nothing was cached.")


def _unzip(archive, folder):
    # Unzip beside the destination, then rename: the destination appears whole or not at all.
    temporary = pathlib.Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".part", dir=folder.parent))
    try:
        with zipfile.ZipFile(archive) as zip_file:
            zip_file.extractall(temporary)
        root = next(temporary.rglob("bert_config.json")).parent  # the 2018 archives hold one folder, 2020's none
        if folder.exists():
            folder.rmdir()  # empty (checked by `fetch`)
        try:
            os.rename(root, folder)
        except OSError:
            if not (folder / "bert_config.json").is_file():  # else another process has just put it in place
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
