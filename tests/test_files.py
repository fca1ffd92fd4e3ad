import os
import stat

import pytest

from kzoo.files import atomic_path, publish_permissions, write_atomically


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_an_atomic_write_replaces_the_file_whole_with_public_permissions(tmp_path, umask_022):
    target = tmp_path / "scores.json"
    target.write_text("old")
    write_atomically(target, "new")
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["scores.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "model.weights.h5"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as temporary:
            assert temporary.name.endswith(".weights.h5") and temporary.parent == tmp_path
            temporary.write_text("half")
            raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["model.weights.h5"]


def test_a_folder_appears_whole_and_readable(tmp_path, umask_022):
    with atomic_path(tmp_path / "version", directory=True) as temporary:
        (temporary / "variables").mkdir()
        (temporary / "variables" / "data").write_bytes(b"x")
        assert not (tmp_path / "version").exists()
    assert stat.S_IMODE((tmp_path / "version").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "version" / "variables" / "data").stat().st_mode) == 0o644


def test_publish_follows_the_umask(tmp_path):
    (tmp_path / "f").write_text("x")
    os.chmod(tmp_path / "f", 0o600)
    old = os.umask(0o027)
    try:
        publish_permissions(tmp_path / "f")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o640
