"""Surviving failure in `fit`: per-worker backups that a killed run resumes from, and a stop at the first NaN loss."""

import errno
import hashlib
import json
import logging
import math
import os
import pathlib
import shutil

import keras
import numpy as np
import tensorflow as tf

logger = logging.getLogger("kzoo")

BACKUP_PREFIX = "backup-"
PARTIAL_PREFIX = ".partial-"  # a backup being written; never restored from
WEIGHTS = "model.weights.h5"
CHECKSUM = "model.weights.h5.sha256"  # written after the weights file read back whole
KEPT_BACKUPS = 2  # the newest, and the one to fall back to if it cannot be read


class WorkerBackupAndRestore(keras.callbacks.Callback):
    """Back up the training state during `fit`, and restore it when the same command runs again after a crash.

    The state is the model's weights, the optimizer's variables (its step count and moments) and how far the plan
    (`epochs` × steps per epoch) got. Run the same command after the process (or, multi-worker, every worker) was
    killed: `fit` restarts from the last backup and finishes the planned number of steps. With `save_freq="epoch"`
    the resumed run sees exactly the batches the uninterrupted one would have, provided each epoch's data is a
    function of the epoch (as arrays with `shuffle=False`, or a dataset that is one pass per epoch), so its final
    weights are the uninterrupted run's. Resuming in the middle of an epoch restarts that epoch's data and ends the
    last epoch early, so the number of steps, not the order of the batches, is kept.

    How it differs from `keras.callbacks.BackupAndRestore`, which it replaces:
    - Each worker keeps its own backup, in `backup_dir/worker-<index>` (its TF_CONFIG task): Keras's writes one
      shared file that two workers cannot both hold open (h5py's file lock). On restore the workers compare the
      epoch and batch they found and, if they differ, all stop with an error naming them, before any loads anything.
    - A backup is written into a `.partial-*` folder, flushed to disk, read back whole (every HDF5 dataset; its
      SHA-256 recorded beside it), then renamed to `backup-<step>` (a rename is atomic); only complete `backup-*`
      folders are restored from, so a kill during a write loses that backup and keeps the one before. The two
      newest backups are kept: when the newest cannot be read (its checksum, state.json or HDF5 file is damaged),
      the run resumes from the one before and says so in a warning; when none can be read, the error names the
      folder to delete to start over.
    - A backup the disk cannot hold is refused before HDF5 writes anything (a full disk in the middle of an HDF5
      write can crash the process), and any `OSError` while writing (`No space left on device`) stops `fit` with an
      error that says the previous backup is intact; the partial backup is removed.
    - A mid-epoch backup resumes at its step (Keras's resumes at the start of its epoch and runs its steps again).

    Args:
        backup_dir: str or path. Folder for the backups, used by this run only; workers may share it.
        save_freq: "epoch" (default) or int. Back up at the end of every epoch, or every this many steps.
        delete_checkpoint: bool. Delete this worker's backups when `fit` completes (default True).

    Example:

    ```python
    import pathlib
    from kzoo.train import WorkerBackupAndRestore

    x = np.arange(24, dtype="float32").reshape(8, 3) / 24
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    backup = WorkerBackupAndRestore("runs/x/backup", delete_checkpoint=False)
    model.fit(x, x.sum(1), batch_size=4, epochs=2, verbose=0, callbacks=[backup])
    assert sorted(p.name for p in pathlib.Path("runs/x/backup/worker-0").iterdir()) == [
        "backup-0000000002", "backup-0000000004"]  # the newest, and the one to fall back to
    # Killed? Run the same command again: training resumes from the last backup.
    again = WorkerBackupAndRestore("runs/x/backup")
    model.fit(x, x.sum(1), batch_size=4, epochs=3, verbose=0, callbacks=[again])
    assert again.restored["step"] == 4 and int(model.optimizer.iterations.numpy()) == 6
    ```

    References:
        `keras.callbacks.BackupAndRestore` (https://keras.io/api/callbacks/backup_and_restore/).
    """

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True):
        super().__init__()
        if not backup_dir:
            raise ValueError(f"backup_dir={backup_dir!r} must name a folder.")
        if save_freq != "epoch" and not (isinstance(save_freq, int) and save_freq > 0):
            raise ValueError(f"save_freq={save_freq!r} must be 'epoch' or a positive number of steps.")
        self.backup_dir = pathlib.Path(backup_dir)
        self.save_freq = save_freq
        self.delete_checkpoint = delete_checkpoint
        self.restored = None  # the state restored by the last on_train_begin, or None

    def on_train_begin(self, logs=None):
        if not hasattr(self.model, "_initial_epoch"):
            raise RuntimeError(
                f"Keras {keras.__version__} models have no `_initial_epoch`, the attribute keras.callbacks."
                "BackupAndRestore sets to resume fit at an epoch; WorkerBackupAndRestore needs updating for it."
            )
        self.steps_per_epoch = self.params.get("steps")
        self.epochs = self.params["epochs"]
        if self.steps_per_epoch is None and self.save_freq != "epoch":
            raise ValueError(f"save_freq={self.save_freq} backs up every few steps, which needs fit to know the "
                             "steps per epoch: pass steps_per_epoch to fit, or use save_freq='epoch'.")
        self.task, self.workers = _task_and_count(self.model.distribute_strategy)
        self.worker_dir = self.backup_dir / self.task
        self.worker_dir.mkdir(parents=True, exist_ok=True)
        for partial in self.worker_dir.glob(PARTIAL_PREFIX + "*"):
            shutil.rmtree(partial)  # an interrupted write
        latest, state = _readable_backup(self.worker_dir)
        if self.workers > 1:
            self._check_workers_agree(state, latest)
        self.restored, self.step, self.shift, self.last_saved_step = state, 0, 0, 0
        if state is None:
            return
        if state["steps_per_epoch"] != self.steps_per_epoch:
            raise ValueError(f"{latest} was written by a run with {state['steps_per_epoch']} steps per epoch, but "
                             f"this fit has {self.steps_per_epoch}: restart with the same command, or delete "
                             f"{self.backup_dir} to start over.")
        if self.model.optimizer is not None and not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)
        self.model.load_weights(latest / WEIGHTS)
        self.model._initial_epoch = state["epoch"]
        self.step = self.last_saved_step = state["step"] or 0
        self.shift = state["batch"]  # batches of the resumed epoch already trained; its data restarts
        logger.info("Restored %s: epoch %d, batch %d of it (step %s).", latest, state["epoch"], state["batch"],
                    state["step"])

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.steps_per_epoch is None:
            return
        self.step = self.epoch * self.steps_per_epoch + batch + 1 + self.shift
        if self.save_freq != "epoch" and self.step - self.last_saved_step >= self.save_freq:
            self._save()
        if self.shift and self.step >= self.epochs * self.steps_per_epoch:
            self.model.stop_training = True  # a mid-epoch resume reaches the planned steps inside the last epoch

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save(epochs_done=epoch + 1)

    def on_train_end(self, logs=None):
        self.model._initial_epoch = None  # a later fit on this model starts where it is asked to
        if self.delete_checkpoint and self.worker_dir.exists():
            shutil.rmtree(self.worker_dir)

    def _save(self, epochs_done=None):
        if self.steps_per_epoch is None:  # epoch backups of a fit that does not know its steps per epoch
            step, (epoch, batch) = None, (epochs_done, 0)
        else:
            step, (epoch, batch) = self.step, divmod(self.step, self.steps_per_epoch)
        final = self.worker_dir / f"{BACKUP_PREFIX}{epoch if step is None else step:010d}"
        if final.exists():
            return  # backed up already
        previous = _latest_backup(self.worker_dir)
        partial = self.worker_dir / f"{PARTIAL_PREFIX}{final.name}"
        shutil.rmtree(partial, ignore_errors=True)
        try:
            _check_free_space(self.model, self.worker_dir)
            partial.mkdir()
            self.model.save_weights(partial / WEIGHTS)
            _fsync(partial / WEIGHTS)
            digest = _verified_digest(partial / WEIGHTS)  # read back whole before the previous backup may go
            (partial / CHECKSUM).write_text(digest + "\n")
            state = {"epoch": epoch, "batch": batch, "step": step, "steps_per_epoch": self.steps_per_epoch,
                     "task": self.task, "workers": self.workers}
            (partial / "state.json").write_text(json.dumps(state) + "\n")
            for path in (partial / CHECKSUM, partial / "state.json", partial):
                _fsync(path)
            os.rename(partial, final)
            _fsync(self.worker_dir)
        except OSError as error:  # a full disk, most often: say so, and keep the backup there is
            shutil.rmtree(partial, ignore_errors=True)
            kept = f"the previous backup {previous} is intact" if previous else "there is no earlier backup"
            raise OSError(error.errno, f"Backing up the training state to {final} failed ({error}); {kept}. Free "
                                       "space there, or pass another backup_dir, and run the same command again "
                                       "to resume.") from error
        for older in sorted(self.worker_dir.glob(BACKUP_PREFIX + "*"))[:-KEPT_BACKUPS]:
            shutil.rmtree(older)  # the newest verified backups stay: one to resume from, one to fall back to
        self.last_saved_step = step or 0

    def _check_workers_agree(self, state, latest):
        mine = [-1, -1] if state is None else [state["epoch"], state["batch"]]
        everyone = _gather_from_workers(self.model.distribute_strategy, mine)
        if any(row != everyone[0] for row in everyone):
            described = "; ".join(
                f"replica {replica}: " + ("no backup" if epoch < 0 else f"epoch {epoch}, batch {batch}")
                for replica, (epoch, batch) in enumerate(everyone)
            )
            raise RuntimeError(
                f"The workers found different backups under {self.backup_dir} ({described}); this is {self.task}, "
                f"which found {latest or 'none'}. Resuming them would train each from a different state. Restore "
                f"the missing backups, or delete {self.backup_dir} on every worker to start over."
            )


class StopOnNaN(keras.callbacks.Callback):
    """Stop `fit` with an error at the first step whose loss is NaN or infinite, naming that step.

    `keras.callbacks.TerminateOnNaN` stops quietly by default and names only the batch within the epoch; a run
    that diverged should fail loudly and say where. Under a multi-worker strategy every worker sees the same
    (all-reduced) loss and stops at the same step. With `steps_per_execution` > 1 the step named is the last of the
    execution that produced the NaN.

    Example:

    ```python
    from kzoo.train import StopOnNaN

    x = np.ones((8, 3), "float32")
    x[5, 0] = np.nan  # in the second batch of 4
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    try:
        model.fit(x, x.sum(1), batch_size=4, epochs=2, shuffle=False, verbose=0, callbacks=[StopOnNaN()])
    except FloatingPointError as error:
        assert str(error).startswith("loss is nan at step 2 (epoch 1, batch 2)")
    ```
    """

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(float(loss)):
            return
        step = int(self.model.optimizer.iterations.numpy())
        raise FloatingPointError(
            f"loss is {float(loss)} at step {step} (epoch {self.epoch + 1}, batch {batch + 1}): training stopped "
            "instead of going on with broken weights. Look at that batch's inputs, lower the learning rate, or clip "
            "gradients (optimizer clipnorm=1.0)."
        )


def _task_and_count(strategy):
    """This process's task name ("worker-1") and the number of workers, from the strategy's cluster."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return "worker-0", 1
    resolver = strategy.cluster_resolver
    jobs = resolver.cluster_spec().as_dict()
    count = sum(len(jobs.get(job, [])) for job in ("chief", "worker"))
    if count <= 1:
        return "worker-0", 1
    return f"{resolver.task_type}-{resolver.task_id}", count


def _latest_backup(worker_dir):
    backups = sorted(worker_dir.glob(BACKUP_PREFIX + "*"))
    return backups[-1] if backups else None


def _readable_backup(worker_dir):
    """(the newest backup that reads back whole, its state), or (None, None) when there is none. An unreadable
    newer one is passed over with a warning; when every backup is unreadable the error names the folder to delete."""
    problems = []
    for backup in sorted(worker_dir.glob(BACKUP_PREFIX + "*"), reverse=True):
        try:
            state = json.loads((backup / "state.json").read_text())
            if not isinstance(state, dict) or not {"epoch", "batch", "step", "steps_per_epoch"} <= set(state):
                raise ValueError(f"state.json holds {state!r}, not a backup's state")
            expected = (backup / CHECKSUM).read_text().strip() if (backup / CHECKSUM).exists() else None
            digest = _verified_digest(backup / WEIGHTS)
            if expected is not None and digest != expected:
                raise ValueError(f"{WEIGHTS} has SHA-256 {digest}, not the {expected} it was written with")
        except (OSError, ValueError) as error:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            problems.append(f"{backup.name}: {error}")
            logger.warning("The backup %s is unreadable (%s); %s.", backup, error,
                           "trying the one before it" if backup != min(worker_dir.glob(BACKUP_PREFIX + "*"))
                           else "there is no earlier one")
            continue
        if problems:
            logger.warning("Resuming from the older backup %s, since the newer ones are unreadable: %s.", backup,
                           "; ".join(problems))
        return backup, state
    if problems:
        raise RuntimeError(f"No backup in {worker_dir} can be read ({'; '.join(problems)}), so training cannot "
                           f"resume. Delete {worker_dir} to start this run from its first step.")
    return None, None


def _verified_digest(weights_file):
    """The SHA-256 of a weights file, after checking that every dataset in it reads back (h5py)."""
    import h5py

    digest = hashlib.sha256()
    with open(weights_file, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    try:
        with h5py.File(weights_file, "r") as h5:
            h5.visititems(lambda name, item: item[()] if isinstance(item, h5py.Dataset) else None)
    except (OSError, KeyError, RuntimeError) as error:
        raise ValueError(f"{weights_file.name} does not read back as HDF5 ({error})") from None
    return digest.hexdigest()


def _check_free_space(model, folder):
    """Refuse a backup the disk cannot hold, before HDF5 starts writing it (a full disk mid-write can crash it)."""
    variables = list(model.weights) + (list(model.optimizer.variables) if model.optimizer is not None else [])
    needed = sum(math.prod(v.shape) * np.dtype(v.dtype).itemsize for v in variables) * 1.1 + (1 << 20)
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise OSError(errno.ENOSPC, f"No space left on device: the backup needs about {int(needed)} bytes and "
                                    f"{folder} has {free} free")


def _gather_from_workers(strategy, values):
    """Every replica's copy of this worker's `values` (a list of ints), in replica order; a collective that every
    worker must call."""
    local = tf.constant([values], tf.int64)
    gathered = strategy.gather(strategy.run(lambda: tf.identity(local)), axis=0)
    return np.asarray(gathered).tolist()


def _fsync(path):
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
