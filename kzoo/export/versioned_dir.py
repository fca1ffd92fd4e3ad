"""Write `saved_models/<name>/<version>/` so that a server polling the folder never sees half a version."""

import contextlib
import pathlib
import shutil
import tempfile


@contextlib.contextmanager
def new_version(base_dir, version):
    """Yield a temporary directory beside `base_dir/<version>`; on success it is renamed into place.

    TF Serving loads any numeric subfolder it finds, so the version must appear whole or not at all: the content is
    written under a hidden temporary name in the same folder and renamed (atomic on one filesystem). An existing
    version is never overwritten; on failure the temporary directory is removed.
    """
    version = int(version)
    if version < 1:
        raise ValueError(f"version={version} must be a positive integer (TF Serving's version folders are numbers).")
    base_dir = pathlib.Path(base_dir)
    target = base_dir / str(version)
    if target.exists():
        raise FileExistsError(f"{target} exists: versions are never overwritten; pass "
                              f"version={next_version(base_dir)}.")
    base_dir.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(dir=base_dir, prefix=f".{version}.partial-"))
    try:
        yield staging
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def next_version(base_dir):
    """One more than the highest numeric version folder in `base_dir` (1 when there is none)."""
    base_dir = pathlib.Path(base_dir)
    versions = [int(p.name) for p in base_dir.iterdir() if p.is_dir() and p.name.isdigit()] if base_dir.is_dir() else []
    return max(versions, default=0) + 1
