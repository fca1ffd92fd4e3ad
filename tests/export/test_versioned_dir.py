"""Hostile cases for exported versions (issue 19, items 4 and 10): readable by another user, concurrent exports into
one folder, folders left by killed exports."""

import contextlib
import os
import pathlib
import signal
import stat
import subprocess
import sys
import textwrap

import keras
import pytest
import tensorflow as tf

from kzoo.export import versioned_dir
from kzoo.export.saved_model_writer import write_saved_model
from kzoo.export.versioned_dir import new_version, remove_stale_partials, write_version


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def modes(folder):
    return {str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode) for p in [folder, *folder.rglob("*")]}


def test_an_exported_saved_model_is_readable_by_other_users(tmp_path, umask_022):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    serve = tf.function(lambda x: {"y": model(x)}, input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    path = write_saved_model(tmp_path / "m", None, serve, [model])
    found = modes(path)
    assert found["."] == 0o755 and found["variables"] == 0o755
    assert found["saved_model.pb"] == 0o644 and found["variables/variables.index"] == 0o644
    assert set(found.values()) == {0o755, 0o644}


def test_a_concurrent_export_takes_the_next_free_version(tmp_path):
    def slow_write(folder):
        (folder / "saved_model.pb").write_text("slow")
        # Another export starts and finishes while this one is still writing: it must not touch this one's folder.
        assert write_version(tmp_path, lambda other: (other / "saved_model.pb").write_text("fast")).name == "1"
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [folder.name]

    path = write_version(tmp_path, slow_write)
    assert path.name == "2" and (path / "saved_model.pb").read_text() == "slow"
    assert (tmp_path / "1" / "saved_model.pb").read_text() == "fast"
    assert sorted(os.listdir(tmp_path)) == ["1", "2"]


def test_a_concurrent_export_of_a_chosen_version_says_the_other_won(tmp_path):
    with pytest.raises(FileExistsError, match=r"another export wrote .*/3 while this one ran.*version=4"):
        with new_version(tmp_path, 3) as staging:
            (staging / "saved_model.pb").write_text("late")
            with new_version(tmp_path, 3) as other:
                (other / "saved_model.pb").write_text("first")
    assert (tmp_path / "3" / "saved_model.pb").read_text() == "first"
    assert sorted(os.listdir(tmp_path)) == ["3"]  # the loser's hidden folder is gone too


def test_a_new_staging_folder_is_locked_before_another_export_may_clean_up(tmp_path, monkeypatch):
    # Another export's cleanup runs under the model folder's lock, so it may run the moment this export lets that
    # lock go: it must find this export's staging folder locked already (a race seen under load, where it deleted the
    # folder a concurrent export had just made).
    real_locked, removed = versioned_dir._locked, []

    @contextlib.contextmanager
    def cleaned_at_every_release(path, blocking=True):
        with real_locked(path, blocking) as held:
            yield held
        if pathlib.Path(path) == tmp_path:
            removed.extend(remove_stale_partials(tmp_path))

    monkeypatch.setattr(versioned_dir, "_locked", cleaned_at_every_release)
    published = write_version(tmp_path, lambda folder: (folder / "saved_model.pb").write_bytes(b"1"))
    assert removed == [] and (published / "saved_model.pb").read_bytes() == b"1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]


def test_a_chosen_version_that_exists_is_refused_before_any_work(tmp_path):
    (tmp_path / "1").mkdir()
    with pytest.raises(FileExistsError, match="pass version=2"):
        write_version(tmp_path, lambda folder: pytest.fail("wrote although the version exists"), version=1)
    with pytest.raises(ValueError, match="version=0 must be a positive integer"):
        write_version(tmp_path, lambda folder: None, version=0)


# An export process, reduced to versioned_dir's own code: `import kzoo` loads Keras (10 s a process on a busy CI
# machine), so the two packages above the module are empty stand-ins for their folders.
KILLED_EXPORT = textwrap.dedent("""
    import pathlib, sys, time, types
    kzoo = pathlib.Path(sys.argv[2])
    for name, folder in (("kzoo", kzoo), ("kzoo.export", kzoo / "export")):
        sys.modules[name] = types.ModuleType(name)
        sys.modules[name].__path__ = [str(folder)]
    from kzoo.export.versioned_dir import write_version

    def write(folder):
        (folder / "saved_model.pb").write_text("half")
        print(folder.name, flush=True)
        time.sleep(60)

    write_version(sys.argv[1], write)
""")


def test_a_killed_exports_folder_is_cleaned_by_the_next_export_and_a_live_ones_kept(tmp_path):
    kzoo = pathlib.Path(versioned_dir.__file__).parents[1]
    killed, live = (subprocess.Popen([sys.executable, "-I", "-c", KILLED_EXPORT, str(tmp_path), str(kzoo)],
                                     stdout=subprocess.PIPE, text=True) for _ in range(2))
    try:
        killed_name, live_name = killed.stdout.readline().strip(), live.stdout.readline().strip()
        assert killed_name.startswith(".1.partial-") and live_name.startswith(".1.partial-")
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        (tmp_path / ".5.partial-oldcode").mkdir()  # left by an export without a lock: nobody holds it
        path = write_version(tmp_path, lambda folder: (folder / "saved_model.pb").write_text("whole"))
        assert path.name == "1"
        assert sorted(os.listdir(tmp_path)) == sorted(["1", live_name])  # the live export keeps its folder
        assert remove_stale_partials(tmp_path) == []
    finally:
        live.kill()
        live.wait()
        killed.stdout.close()
        live.stdout.close()
    assert remove_stale_partials(tmp_path) == [live_name]
    assert sorted(os.listdir(tmp_path)) == ["1"]
