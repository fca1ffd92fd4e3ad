"""Writing files and folders so that a reader never sees half of one: written under a temporary name beside the
target, then renamed into place (atomic on one filesystem); on failure the temporary is removed. What is published
gets the permissions of any file the user makes (0666 or 0777 less the umask), not the private 0600 / 0700 that
`tempfile` gives its temporaries, so that another user (a TF Serving process, say) can read it."""

import contextlib
import os
import pathlib
import shutil
import tempfile


def umask():
    """The process's file mode creation mask.

    Example:
    ```python
    import os
    from kzoo.files import umask

    previous = os.umask(0o027)
    assert umask() == 0o027  # read without changing it
    os.umask(previous)
    ```
    """
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish_permissions(path):
    """Give `path`, and everything under it if it is a folder, the permissions of a freshly made file or folder.

    Example:
    ```python
    import os, pathlib, stat, tempfile
    from kzoo.files import publish_permissions, umask

    folder = pathlib.Path(tempfile.mkdtemp(dir="."))  # 0700, as tempfile makes it
    (folder / "model.pb").write_bytes(b"...")
    os.chmod(folder / "model.pb", 0o600)
    publish_permissions(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~umask()
    assert stat.S_IMODE((folder / "model.pb").stat().st_mode) == 0o666 & ~umask()
    ```
    """
    path = pathlib.Path(path)
    mask = umask()
    for item in [path, *(path.rglob("*") if path.is_dir() else ())]:
        if not item.is_symlink():
            os.chmod(item, (0o777 if item.is_dir() else 0o666) & ~mask)


@contextlib.contextmanager
def atomic_path(path, directory=False):
    """Yield a temporary path beside `path` to write into (a file, or a folder with `directory=True`); when the block
    ends without an exception it is published and renamed to `path`, replacing a file there; otherwise removed.

    Example:
    ```python
    from kzoo.files import atomic_path

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with atomic_path("runs/x/model.keras") as temporary:
        model.save(temporary)  # a reader of runs/x/model.keras sees the whole file or the one before
    assert keras.saving.load_model("runs/x/model.keras").count_params() == 8
    ```
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{path.name}."
    if directory:
        temporary = pathlib.Path(tempfile.mkdtemp(dir=path.parent, prefix=prefix, suffix=".partial"))
    else:
        # The temporary keeps the whole ending (".weights.h5", ".keras"): Keras's writers check it.
        handle, name = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".partial" + "".join(path.suffixes))
        os.close(handle)
        temporary = pathlib.Path(name)
    try:
        yield temporary
        publish_permissions(temporary)
        os.replace(temporary, path)
    except BaseException:
        if temporary.is_dir():
            shutil.rmtree(temporary, ignore_errors=True)
        else:
            temporary.unlink(missing_ok=True)
        raise


def write_atomically(path, data):
    """Write `data` (bytes, or str as UTF-8) to `path` atomically; returns the path.

    Example:
    ```python
    from kzoo.files import write_atomically

    path = write_atomically("runs/x/config.json", '{"epochs": 2}')
    assert path.read_text() == '{"epochs": 2}'
    ```
    """
    with atomic_path(path) as temporary:
        with open(temporary, "wb") as file:
            file.write(data.encode("utf-8") if isinstance(data, str) else data)
            file.flush()
            os.fsync(file.fileno())
    return pathlib.Path(path)
