"""Google's published BERT checkpoints, by name, downloaded once into a local cache.

`RELEASES` lists the archives of google-research/bert: the 24 compact models of Turc et al. (2019), released
2020-03-11 (`uncased_L-{2,4,6,8,10,12}_H-{128,256,512,768}_A-{H/64}`), and the original BERT-Base and BERT-Large
(uncased and cased, 2018-10-18), whole-word-masking BERT-Large (2019-05-30), multilingual cased (2018-11-23) and
Chinese (2018-11-03) models. A name such as "uncased_L-4_H-512_A-8" (BERT-Small) selects one. The compact grid holds
a re-trained BERT-Base under the same name as the original: "uncased_L-12_H-768_A-12" is the 2018 original, and
"2020_02_20/uncased_L-12_H-768_A-12" the re-trained one (every release answers to "<date>/<name>").

`fetch(name)` downloads `https://storage.googleapis.com/bert_models/<date>/<name>.zip` once and unzips it into
`<cache>/bert_models/<date>/<name>/`, where `<cache>` is `$KZOO_CACHE_DIR` or `~/.cache/kzoo`. The archive is
written to a part file beside the cache folder (locked while it is written, taken over by the next try if a download
is killed), verified, unzipped into a temporary folder, and only then renamed into place: an interrupted or failed
download leaves no folder that could be taken for a whole checkpoint.

What is verified: the archive's SHA-256 when `Release.sha256` is known (Google publishes none, so the entries here
have none); otherwise that the file is a zip archive whose every member passes its CRC-32 check (which catches
truncated and corrupted downloads), that it holds exactly one `bert_config.json`, a `vocab.txt` and a
`bert_model.ckpt` checkpoint (index and data), that no member name repeats or would unzip outside its folder, that
it unpacks to no more than `MAX_UNPACK_RATIO` times its size (and `MAX_UNPACKED_BYTES`), and that the configuration
has the number of layers, width and heads the name promises; the configuration unpacked must be the one verified.
The tensors' shapes are then checked against the configuration when the checkpoint is loaded
(`kzoo.checkpoints.bert_checkpoint`).

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
import fcntl
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
import zlib

import keras

BASE_URL = "https://storage.googleapis.com/bert_models"
_SIZES = re.compile(r"_L-(\d+)_H-(\d+)_A-(\d+)$")
_CONFIG = "bert_config.json"
_REQUIRED = (_CONFIG, "vocab.txt", "bert_model.ckpt.index")
# An archive's unpacked size is bounded before anything is unpacked. The largest release (BERT-Large) unpacks to
# about 1.3 GB from a zip of about the same size: float weights hardly compress.
MAX_UNPACKED_BYTES = 4 << 30
MAX_UNPACK_RATIO = 4
# Files that make a folder a checkpoint (its configuration, or weights without which config.json is named missing).
_CHECKPOINT_FILES = ("bert_config.json", "config.json", "model.safetensors", "pytorch_model.bin")


@dataclasses.dataclass(frozen=True)
class Release:
    """One published archive: `<BASE_URL>/<date>/<name>.zip`, with the sizes its name states.

    Args:
        date: str. The folder of the release on Google's bucket, e.g. "2020_02_20".
        name: str. The archive's name without ".zip", e.g. "uncased_L-4_H-512_A-8".
        sha256: str, optional. The archive's SHA-256, checked after download when given.

    Example:
    ```python
    from kzoo.checkpoints import find_release

    release = find_release("uncased_L-4_H-512_A-8")
    assert release.url == "https://storage.googleapis.com/bert_models/2020_02_20/uncased_L-4_H-512_A-8.zip"
    assert release.sizes == {"num_layers": 4, "hidden_dim": 512, "num_heads": 8}
    ```
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
    """`$KZOO_CACHE_DIR`, or `~/.cache/kzoo` when it is not set.

    Example:
    ```python
    import os, pathlib
    from kzoo.checkpoints import cache_dir

    os.environ["KZOO_CACHE_DIR"] = "/data/kzoo"
    assert cache_dir() == pathlib.Path("/data/kzoo")
    del os.environ["KZOO_CACHE_DIR"]
    assert cache_dir() == pathlib.Path.home() / ".cache" / "kzoo"
    ```
    """
    return pathlib.Path(os.environ.get("KZOO_CACHE_DIR") or pathlib.Path.home() / ".cache" / "kzoo")


def find_release(name):
    """The `Release` called `name` ("uncased_L-4_H-512_A-8" or "2020_02_20/uncased_L-4_H-512_A-8"), or None.

    Example:
    ```python
    from kzoo.checkpoints import find_release

    assert find_release("uncased_L-12_H-768_A-12").date == "2018_10_18"  # the original BERT-Base
    assert find_release("2020_02_20/uncased_L-12_H-768_A-12").date == "2020_02_20"  # its re-trained namesake
    assert find_release("uncased_L-3_H-100_A-1") is None
    ```
    """
    return RELEASES.get(str(name))


def resolve(weights):
    """A local checkpoint folder for `weights`: an existing path as it is, a release name fetched into the cache.

    Example:
    ```python
    import pathlib
    from kzoo.checkpoints.bert_releases import resolve

    pathlib.Path("my_checkpoint").mkdir()
    assert resolve("my_checkpoint") == pathlib.Path("my_checkpoint")  # a folder is used as it is
    try:
        resolve("uncased_L-3_H-100_A-1")
    except FileNotFoundError as error:
        assert "neither an existing checkpoint folder nor a published BERT release" in str(error)
    ```
    """
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
    folder's one subfolder (as some zips unpack), or a release name fetched into the cache.

    Example:
    ```python
    import pathlib
    from kzoo.checkpoints import checkpoint_folder

    pathlib.Path("download/uncased_L-2_H-128_A-2").mkdir(parents=True)  # as a 2018 zip unpacks: one subfolder
    pathlib.Path("download/uncased_L-2_H-128_A-2/bert_config.json").write_text("{}")
    assert checkpoint_folder("download") == pathlib.Path("download/uncased_L-2_H-128_A-2")
    ```
    """
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
    """The folder of the unzipped `release` (a `Release` or its name), downloaded and verified on first use.

    The download goes to `<cache>/bert_models/<date>/.<name>.zip.part`, locked while it is written: a second
    process fetching the same release waits for the first and then uses its folder, and the part file a killed
    download leaves behind is taken over (rewritten) by the next try and removed when it ends.

    Example:
    ```python
    import os
    from kzoo.checkpoints.bert_releases import fetch

    os.environ["KZOO_CACHE_DIR"] = "cache"  # here: an empty cache, and no internet
    try:
        fetch("uncased_L-2_H-128_A-2")
    except OSError as error:  # the message says which URL to download and where to unzip it
        assert "uncased_L-2_H-128_A-2.zip" in str(error) and "bert_models/2020_02_20" in str(error)
    del os.environ["KZOO_CACHE_DIR"]
    ```
    """
    if not isinstance(release, Release):
        name, release = release, find_release(release)
        if release is None:
            raise ValueError(f"No published BERT release is called {name!r}; see "
                             "kzoo.checkpoints.bert_releases.RELEASES.")
    folder = release.folder
    if (folder / "bert_config.json").is_file():
        return folder
    _refuse_partial_folder(release, folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    part = folder.parent / f".{release.name}.zip.part"
    descriptor = os.open(part, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # another process fetching this release: wait for it
        if (folder / "bert_config.json").is_file():
            return folder  # it finished while this one waited
        _refuse_partial_folder(release, folder)
        _remove_leftovers(release, folder, part)
        try:
            _download(release, folder, part)
            _verify(release, part)
            _unzip(release, part, folder)
        finally:
            part.unlink(missing_ok=True)
    finally:
        os.close(descriptor)
    return folder


def _refuse_partial_folder(release, folder):
    if folder.exists() and any(folder.iterdir()):
        raise FileExistsError(
            f"{folder} exists but holds no bert_config.json, so it is not a whole checkpoint. Remove the folder to "
            f"download {release.url} again, or unzip that archive so that {folder / 'bert_config.json'} exists."
        )


def _remove_leftovers(release, folder, part):
    """What killed fetches of this release left (called under its lock): unzip folders, and the part files of
    kzoo versions that named them at random."""
    for path in folder.parent.glob(f".{release.name}.*.part"):
        if path == part:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _download(release, folder, part):
    try:
        with open(part, "r+b") as file, urllib.request.urlopen(release.url, timeout=60) as response:
            file.truncate(0)  # a killed download's bytes are not reused: the archive is verified whole
            total = int(response.headers.get("Content-Length") or 0) or None
            progress = keras.utils.Progbar(total, unit_name="byte") if total else None
            while chunk := response.read(1 << 20):
                file.write(chunk)
                if progress:
                    progress.add(len(chunk))
    except (OSError, http.client.HTTPException) as error:  # urllib.error.URLError is an OSError
        raise OSError(
            f"Could not download {release.url} ({error}). Download that file where the internet is reachable and "
            f"unzip it so that its files (bert_config.json, vocab.txt, bert_model.ckpt.*) lie directly in {folder}, "
            "or pass the unzipped folder itself as weights=."
        ) from error


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
            infos = zip_file.infolist()
            _check_members(release, archive, infos)
            broken = zip_file.testzip()
            config_member = next(m.filename for m in infos if pathlib.PurePosixPath(m.filename).name == _CONFIG)
            config_text = zip_file.read(config_member)
    except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as error:
        raise ValueError(f"{release.url} did not download as a whole zip archive ({type(error).__name__}: {error}). "
                         "Nothing was cached; try again.") from None
    if broken is not None:
        raise ValueError(f"{release.url}: the member {broken} fails its CRC check. Nothing was cached; try again.")
    try:
        config = json.loads(config_text)
    except ValueError as error:
        raise ValueError(f"{release.url}: {config_member} is not JSON ({error}). Nothing was cached.") from None
    if not isinstance(config, dict):
        raise ValueError(f"{release.url}: {config_member} holds a JSON {type(config).__name__}, not a BERT "
                         "configuration object. Nothing was cached.")
    found = {"num_layers": config.get("num_hidden_layers"), "hidden_dim": config.get("hidden_size"),
             "num_heads": config.get("num_attention_heads")}
    if found != release.sizes:
        raise ValueError(f"{release.url}: bert_config.json describes {found}, but the name promises {release.sizes}. "
                         "Nothing was cached.")
    return config_text


def _check_members(release, archive, infos):
    """Refuse, from the zip's directory alone, an archive that is not one checkpoint: duplicate or unsafe names,
    anything but exactly one bert_config.json, missing files, or more unpacked bytes than a checkpoint can have."""
    members = [info.filename for info in infos]
    duplicates = sorted({m for m in members if members.count(m) > 1})
    if duplicates:
        raise ValueError(f"{release.url} holds {', '.join(duplicates)} more than once: an archive whose member "
                         "names repeat could be verified with one file and unpacked with another. Nothing was cached.")
    unsafe = [m for m in members if m.startswith("/") or ".." in pathlib.PurePosixPath(m).parts]
    if unsafe:
        raise ValueError(f"{release.url} has members that would unzip outside their folder: {unsafe}.")
    configs = [m for m in members if pathlib.PurePosixPath(m).name == _CONFIG]
    if len(configs) > 1:
        raise ValueError(f"{release.url} holds {len(configs)} {_CONFIG} files ({', '.join(configs)}); a checkpoint "
                         "archive holds one. Nothing was cached.")
    root = configs[0][: -len(_CONFIG)] if configs else ""
    missing = [name for name in _REQUIRED if root + name not in members]
    if not any(m.startswith(root + "bert_model.ckpt.data-") for m in members):
        missing.append("bert_model.ckpt.data-*")
    if missing:
        raise ValueError(f"{release.url} lacks {', '.join(missing)} (it holds {', '.join(members)}): it is not a "
                         "BERT checkpoint archive. Nothing was cached.")
    unpacked = sum(info.file_size for info in infos)  # zipfile never writes more than a member's stated size
    limit = min(MAX_UNPACKED_BYTES, MAX_UNPACK_RATIO * archive.stat().st_size)
    if unpacked > limit:
        raise ValueError(f"{release.url} would unpack {archive.stat().st_size} bytes into {unpacked}, more than the "
                         f"{limit} a BERT checkpoint can need (its float weights hardly compress; at most "
                         f"{MAX_UNPACK_RATIO}× the archive and {MAX_UNPACKED_BYTES} bytes in all). Nothing was cached.")


def _unzip(release, archive, folder):
    """Unzip beside the destination, check that the configuration unpacked is the one verified, then rename: the
    destination appears whole or not at all."""
    temporary = pathlib.Path(tempfile.mkdtemp(prefix=f".{release.name}.", suffix=".part", dir=folder.parent))
    try:
        try:
            with zipfile.ZipFile(archive) as zip_file:
                config = next(m for m in zip_file.namelist() if pathlib.PurePosixPath(m).name == _CONFIG)
                verified = zip_file.read(config)
                zip_file.extractall(temporary)
        except (zipfile.BadZipFile, EOFError, zlib.error) as error:
            raise ValueError(f"{release.url} did not unzip ({type(error).__name__}: {error}). Nothing was cached; "
                             "try again.") from None
        configs = list(temporary.rglob(_CONFIG))
        if len(configs) != 1 or configs[0].read_bytes() != verified:
            raise ValueError(f"{release.url} unpacked to other files than the ones verified. Nothing was cached.")
        root = configs[0].parent  # the 2018 archives hold one folder, 2020's none
        if folder.exists():
            folder.rmdir()  # empty (checked by `fetch`)
        os.rename(root, folder)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
