"""Write `saved_models/<name>/<version>/` so that a server polling the folder never sees half a version, another
user (the TF Serving process) can read it, two exports into one folder never overwrite or half-break each other,
and a killed export's leftovers are cleaned by the next one.

TF Serving loads any numeric subfolder it finds, so a version is written under a hidden `.N.partial-*` name in the
same folder and renamed into place (atomic on one filesystem). While it is written, the export holds an exclusive
`flock` on that hidden folder; the kernel drops the lock when the process ends, however it ends. Each export first
removes the hidden folders nobody holds (killed exports'), under a lock on the model folder itself, so it never
removes one another live export is still writing.
"""

import contextlib
import errno
import fcntl
import os
import pathlib
import shutil
import tempfile

from kzoo.files import publish_permissions

PARTIAL = ".partial-"


def next_version(base_dir):
    """One more than the highest numeric version folder in `base_dir` (1 when there is none).

    Example:
    ```python
    import pathlib
    from kzoo.export.versioned_dir import next_version

    assert next_version("models/none_yet") == 1
    pathlib.Path("models/m/1").mkdir(parents=True)
    pathlib.Path("models/m/7").mkdir()
    pathlib.Path("models/m/notes").mkdir()  # not a version: TF Serving reads numeric folders only
    assert next_version("models/m") == 8
    ```
    """
    base_dir = pathlib.Path(base_dir)
    versions = [int(p.name) for p in base_dir.iterdir() if p.is_dir() and p.name.isdigit()] if base_dir.is_dir() else []
    return max(versions, default=0) + 1


@contextlib.contextmanager
def _locked(path, blocking=True):
    """Hold an exclusive flock on the folder `path` (opened read-only); yield False if `blocking` is off and another
    process holds it."""
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(descriptor)  # releases the lock


def remove_stale_partials(base_dir):
    """Remove the hidden `.N.partial-*` folders in `base_dir` that no live export holds; returns their names.

    Exports call it themselves, under the model folder's lock; call it to tidy a folder by hand.

    Example:
    ```python
    import pathlib
    from kzoo.export.versioned_dir import remove_stale_partials

    pathlib.Path("models/m/.3.partial-x1y2").mkdir(parents=True)  # left by an export that was killed
    pathlib.Path("models/m/1").mkdir()
    assert remove_stale_partials("models/m") == [".3.partial-x1y2"]
    assert [p.name for p in pathlib.Path("models/m").iterdir()] == ["1"]
    ```
    """
    removed = []
    for path in sorted(pathlib.Path(base_dir).glob(f".*{PARTIAL}*")):
        if not path.is_dir() or path.is_symlink():
            continue
        with _locked(path, blocking=False) as free:
            if free:
                shutil.rmtree(path)
                removed.append(path.name)
    return removed


def _rename_into_place(staging, base_dir, version):
    """Rename `staging` to `base_dir/<version>` (or, with `version=None`, to the next free version); return the
    target. Called under the model folder's lock, so kzoo exports decide one at a time."""
    while True:
        number = next_version(base_dir) if version is None else version
        target = base_dir / str(number)
        if not target.exists():
            try:
                os.rename(staging, target)
                return target
            except OSError as error:  # a writer that is not kzoo's made it between the check and the rename
                if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
        if version is not None:
            raise FileExistsError(
                f"another export wrote {target} while this one ran; versions are never overwritten, so this export "
                f"was discarded. Export again with version={next_version(base_dir)}, or with no version to take the "
                "next free one.")


@contextlib.contextmanager
def _staged(base_dir, version):
    """Yield a locked hidden folder in `base_dir` to write a version into, and a one-item list that receives the
    published version's path; on failure the folder is removed."""
    base_dir = pathlib.Path(base_dir)
    base_dir.mkdir(parents=True, exist_ok=True)
    published = []
    with contextlib.ExitStack() as staging_lock:
        with _locked(base_dir):
            remove_stale_partials(base_dir)
            hint = next_version(base_dir) if version is None else version
            staging = pathlib.Path(tempfile.mkdtemp(dir=base_dir, prefix=f".{hint}{PARTIAL}"))
            # Locked before the model folder's lock ends: another export's cleanup, which runs under that lock,
            # must never find the new folder unlocked and take it for a killed export's.
            staging_lock.enter_context(_locked(staging))
        try:
            yield staging, published
            publish_permissions(staging)  # tempfile made it 0700: TF Serving may run as another user
            with _locked(base_dir):
                published.append(_rename_into_place(staging, base_dir, version))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise


def _check_version(base_dir, version):
    if version is None:
        return None
    if isinstance(version, bool) or int(version) != version or version < 1:
        raise ValueError(f"version={version!r} must be a positive integer (TF Serving's version folders are "
                         "numbers).")
    target = pathlib.Path(base_dir) / str(int(version))
    if target.exists():
        raise FileExistsError(f"{target} exists: versions are never overwritten; pass "
                              f"version={next_version(base_dir)}, or no version to take the next free one.")
    return int(version)


@contextlib.contextmanager
def new_version(base_dir, version):
    """Yield a temporary folder to write `base_dir/<version>/` into; when the block ends it is made readable by
    everyone the umask allows (like any folder the user makes) and renamed into place, whole.

    An existing version is never overwritten: one that exists already is refused before any work, and if another
    export publishes the same version while the block runs, this one is discarded with a `FileExistsError` that
    says so. On failure the temporary folder is removed; one left by a killed process is removed by the next
    export into the folder. Use `write_version` to take the next free version instead.

    Example:
    ```python
    import pathlib
    from kzoo.export.versioned_dir import new_version

    with new_version("models/m", 1) as staging:
        (staging / "saved_model.pb").write_bytes(b"...")
        assert not pathlib.Path("models/m/1").exists()  # a server sees the version whole or not at all
    assert (pathlib.Path("models/m/1") / "saved_model.pb").read_bytes() == b"..."
    ```
    """
    version = _check_version(base_dir, version)
    if version is None:
        raise ValueError("new_version needs a version number; write_version(base_dir, write) takes the next free one.")
    with _staged(base_dir, version) as (staging, _):
        yield staging


def write_version(base_dir, write, version=None):
    """Call `write(folder)` to fill a new version of `base_dir` and publish it as `new_version` does; returns the
    version's path.

    With `version=None` the version is the next free one when the writing ends, so that two exports into one folder
    at the same time both succeed, as consecutive versions.

    Example:
    ```python
    from kzoo.export.versioned_dir import write_version

    first = write_version("models/m", lambda folder: (folder / "saved_model.pb").write_bytes(b"1"))
    second = write_version("models/m", lambda folder: (folder / "saved_model.pb").write_bytes(b"2"))
    assert (first.name, second.name) == ("1", "2")
    assert (second / "saved_model.pb").read_bytes() == b"2"
    ```
    """
    version = _check_version(base_dir, version)
    with _staged(base_dir, version) as (staging, published):
        write(staging)
    return published[0]
