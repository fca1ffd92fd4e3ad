"""Surviving failure: a run killed with SIGKILL resumes from its last backup when the same command runs again (one
process, and two workers), a backup interrupted mid-write is never restored, workers that found different backups
refuse to resume, and a NaN loss stops training with the step it happened at."""

import errno
import json
import logging
import shutil

import keras
import numpy as np
import pytest

from kzoo.train import StopOnNaN, WorkerBackupAndRestore, fault_tolerance
from tests.train import fit_worker
from tests.train.worker_processes import Processes, assert_same_training, free_ports, load, tf_config

STEPS_PER_EPOCH = fit_worker.EXAMPLES // fit_worker.GLOBAL_BATCH  # 4
PLANNED_STEPS = fit_worker.EPOCHS * STEPS_PER_EPOCH  # 16


def tiny_model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.1, momentum=0.9), "mse")
    return model


def tiny_data():
    x = np.random.default_rng(0).normal(size=(16, 3)).astype("float32")
    return x, x.sum(axis=1, keepdims=True)


def test_a_nan_loss_stops_training_with_an_error_naming_the_step():
    x, y = tiny_data()
    x[9, 0] = np.nan  # in the third batch of 4
    model = tiny_model()
    with pytest.raises(FloatingPointError, match=r"loss is nan at step 3 \(epoch 1, batch 3\)"):
        model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0, callbacks=[StopOnNaN()])
    assert int(model.optimizer.iterations.numpy()) == 3  # it did not train on


def test_a_backup_interrupted_while_written_is_never_restored(tmp_path, monkeypatch):
    x, y = tiny_data()
    model = tiny_model()
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0,
              callbacks=[WorkerBackupAndRestore(tmp_path, delete_checkpoint=False)])
    after_epoch_1 = [w.copy() for w in model.get_weights()]

    def killed_while_writing(path, *args, **kwargs):
        open(path, "wb").write(b"\x89HDF\r\n")  # the first bytes of an h5 file, then the process dies
        raise KeyboardInterrupt("killed while writing")

    monkeypatch.setattr(model, "save_weights", killed_while_writing)
    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0,
                  callbacks=[WorkerBackupAndRestore(tmp_path, delete_checkpoint=False)])
    monkeypatch.undo()
    worker_dir = tmp_path / "worker-0"
    assert sorted(p.name for p in worker_dir.iterdir()) == [".partial-backup-0000000008", "backup-0000000004"]

    restored_model, backup = tiny_model(), WorkerBackupAndRestore(tmp_path)
    restored_model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0, callbacks=[backup])
    assert backup.restored == {"epoch": 1, "batch": 0, "step": 4, "steps_per_epoch": 4, "task": "worker-0",
                               "workers": 1}
    assert int(restored_model.optimizer.iterations.numpy()) == 4  # epochs=1 was already done: nothing to train
    for restored, expected in zip(restored_model.get_weights(), after_epoch_1):
        np.testing.assert_array_equal(restored, expected)
    assert not worker_dir.exists()  # fit completed: the backups are deleted


def test_workers_that_found_different_backups_refuse_to_resume(tmp_path, monkeypatch):
    x, y = tiny_data()
    tiny_model().fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0,
                     callbacks=[WorkerBackupAndRestore(tmp_path, delete_checkpoint=False)])
    # As worker 0 of two, whose partner restored epoch 2 where it restored epoch 1.
    monkeypatch.setattr(fault_tolerance, "_task_and_count", lambda strategy: ("worker-0", 2))
    monkeypatch.setattr(fault_tolerance, "_gather_from_workers", lambda strategy, mine: [mine, [2, 0]])
    model = tiny_model()
    with pytest.raises(RuntimeError, match=r"different backups .*\(replica 0: epoch 1, batch 0; replica 1: epoch 2, "
                                           r"batch 0\); this is worker-0, which found .*backup-0000000004"):
        model.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0, callbacks=[WorkerBackupAndRestore(tmp_path)])
    assert int(model.optimizer.iterations.numpy()) == 0  # nothing was loaded or trained


def killed_and_resumed(processes, tmp_path, names, configs, args, pause_at):
    """Run fit_worker.py as `names` with `args`, SIGKILL them all once each has passed step `pause_at`, then run the
    same commands again to the end; returns each resumed run's results."""
    outputs = {name: tmp_path / f"{name}.npz" for name in names}

    def start_all(round_name):
        for name, config in zip(names, configs):
            processes.start(f"{name}-{round_name}", [outputs[name], *args, "--pause-at", pause_at,
                                                     "--marker", tmp_path / f"{name}.paused"], tf_config=config)

    start_all("first")
    started = [f"{name}-first" for name in names]
    for name in names:
        processes.wait_for_file(tmp_path / f"{name}.paused", started)
    processes.kill(started)
    assert not any(outputs[name].exists() for name in names)
    start_all("again")
    processes.wait([f"{name}-again" for name in names])
    return [load(outputs[name]) for name in names]


def test_a_killed_run_resumes_from_its_epoch_backup_and_ends_with_the_uninterrupted_weights(tmp_path):
    with Processes(tmp_path) as processes:
        # Killed after step 6, in the middle of the second epoch; the last backup is from the end of the first.
        [resumed] = killed_and_resumed(processes, tmp_path, ["run"], [None], ["--backup", tmp_path / "backup"], 6)
    assert json.loads(resumed["restored"]) == {"epoch": 1, "batch": 0, "step": 4, "steps_per_epoch": 4,
                                               "task": "worker-0", "workers": 1}
    assert resumed["steps_run"] == PLANNED_STEPS - 4 and resumed["iterations"] == PLANNED_STEPS
    assert_same_training(resumed, fit_worker.train(), atol=1e-6, rtol=1e-6, first_epoch=1)
    assert not (tmp_path / "backup" / "worker-0").exists()


def test_step_backups_resume_mid_epoch_and_finish_the_planned_steps(tmp_path):
    with Processes(tmp_path) as processes:
        # Backups every 3 steps; killed after step 8: the last backup is step 6, batch 2 of the second epoch.
        [resumed] = killed_and_resumed(
            processes, tmp_path, ["run"], [None], ["--backup", tmp_path / "backup", "--save-freq", 3], 8
        )
    assert json.loads(resumed["restored"])["step"] == 6
    # The optimizer's step count came back with the weights: 6 restored + 10 run = the 16 planned.
    assert resumed["steps_run"] == PLANNED_STEPS - 6 and resumed["iterations"] == PLANNED_STEPS
    fresh_first_epoch_loss = fit_worker.train()["losses"][0]
    assert resumed["losses"][0] < 0.9 * fresh_first_epoch_loss  # it went on from trained weights


def test_two_killed_workers_resume_together_and_end_with_the_uninterrupted_weights(tmp_path):
    ports = free_ports(2)
    names = ["worker-0", "worker-1"]
    with Processes(tmp_path) as processes:
        resumed = killed_and_resumed(processes, tmp_path, names, [tf_config(ports, i) for i in range(2)],
                                     ["--backup", tmp_path / "backup"], 6)
    for index, result in enumerate(resumed):
        assert json.loads(result["restored"]) == {"epoch": 1, "batch": 0, "step": 4, "steps_per_epoch": 4,
                                                  "task": f"worker-{index}", "workers": 2}
        assert result["replicas"] == 2 and result["iterations"] == PLANNED_STEPS
    for a, b in zip(resumed[0]["weights"], resumed[1]["weights"]):
        np.testing.assert_array_equal(a, b)
    assert_same_training(resumed[0], fit_worker.train(), first_epoch=1)


def two_backups(tmp_path):
    """Backups after epochs 1 and 2 of a fit, and the weights at each."""
    x, y = tiny_data()
    model, weights = tiny_model(), []
    record = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: weights.append(model.get_weights()))
    model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0,
              callbacks=[WorkerBackupAndRestore(tmp_path, delete_checkpoint=False), record])
    worker_dir = tmp_path / "worker-0"
    assert sorted(p.name for p in worker_dir.iterdir()) == ["backup-0000000004", "backup-0000000008"]
    return worker_dir, weights


def resume(tmp_path, epochs=2):
    x, y = tiny_data()
    model, backup = tiny_model(), WorkerBackupAndRestore(tmp_path, delete_checkpoint=False)
    model.fit(x, y, batch_size=4, epochs=epochs, shuffle=False, verbose=0, callbacks=[backup])
    return model, backup


@pytest.mark.parametrize("damage", ["truncated weights", "flipped byte", "state not json"])
def test_an_unreadable_newest_backup_falls_back_to_the_one_before_and_says_so(tmp_path, caplog, damage):
    worker_dir, weights = two_backups(tmp_path)
    newest = worker_dir / "backup-0000000008"
    data = (newest / "model.weights.h5").read_bytes()
    if damage == "truncated weights":
        (newest / "model.weights.h5").write_bytes(data[: len(data) // 2])
    elif damage == "flipped byte":
        (newest / "model.weights.h5").write_bytes(data[:-20] + bytes([data[-20] ^ 1]) + data[-19:])
    else:
        (newest / "state.json").write_text('{"epoch": 2, "batch"')
    with caplog.at_level(logging.WARNING, logger="kzoo"):
        model, backup = resume(tmp_path, epochs=1)  # epoch 1 was backed up: nothing left to train
    assert backup.restored["step"] == 4
    assert f"The backup {newest} is unreadable" in caplog.text and "Resuming from the older backup" in caplog.text
    for restored, expected in zip(model.get_weights(), weights[0]):
        np.testing.assert_array_equal(restored, expected)


def test_when_no_backup_can_be_read_the_error_names_the_folder_to_delete(tmp_path):
    worker_dir, _ = two_backups(tmp_path)
    for backup in worker_dir.iterdir():
        (backup / "model.weights.h5").write_bytes(b"\x89HDF\r\n\x1a\n broken")
    with pytest.raises(RuntimeError, match=rf"No backup in {worker_dir} can be read \(backup-0000000008: .*; "
                                           rf"backup-0000000004: .*\), so training cannot resume. Delete "
                                           rf"{worker_dir} to start"):
        resume(tmp_path)


def test_a_full_disk_during_a_backup_fails_clearly_and_keeps_the_previous_backup(tmp_path, monkeypatch):
    x, y = tiny_data()
    model = tiny_model()
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0,
              callbacks=[WorkerBackupAndRestore(tmp_path, delete_checkpoint=False)])
    after_epoch_1 = model.get_weights()

    def disk_full(path, *args, **kwargs):
        open(path, "wb").write(b"\x89HDF\r\n\x1a\n")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(model, "save_weights", disk_full)
    with pytest.raises(OSError, match=r"Backing up the training state to .*backup-0000000008 failed \(\[Errno 28\] "
                                      r"No space left on device\); the previous backup .*backup-0000000004 is intact"):
        model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0,
                  callbacks=[WorkerBackupAndRestore(tmp_path, delete_checkpoint=False)])
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "worker-0").iterdir()) == ["backup-0000000004"]
    restored, backup = resume(tmp_path, epochs=1)
    assert backup.restored["step"] == 4
    for a, b in zip(restored.get_weights(), after_epoch_1):
        np.testing.assert_array_equal(a, b)


def test_a_backup_the_disk_cannot_hold_is_refused_before_writing(tmp_path, monkeypatch):
    monkeypatch.setattr(fault_tolerance.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9, 4096))
    x, y = tiny_data()
    with pytest.raises(OSError, match=r"No space left on device: the backup needs about \d+ bytes and .* has 4096 "
                                      r"free\); there is no earlier backup"):
        tiny_model().fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[WorkerBackupAndRestore(tmp_path)])
    assert list((tmp_path / "worker-0").iterdir()) == []
