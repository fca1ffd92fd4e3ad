"""Training processes for the distribution and fault-tolerance tests: `tests/train/fit_worker.py` started with a
chosen TF_CONFIG, every process stopped by the test that started it (SIGKILL at the latest when the test ends)."""

import ctypes
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import numpy as np

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
FIT_WORKER = pathlib.Path(__file__).with_name("fit_worker.py")
PROCESS_SECONDS = 150  # the most any one training process may take before the test fails it


def _die_with_the_test():
    """Run in the child before it starts: on Linux, the kernel SIGKILLs it if the test process dies first."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG


def free_ports(count):
    """`count` TCP ports on 127.0.0.1 that were free a moment ago (bound together, so they differ)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for one in sockets:
            one.bind(("127.0.0.1", 0))
        return [one.getsockname()[1] for one in sockets]
    finally:
        for one in sockets:
            one.close()


def tf_config(ports, index):
    """The TF_CONFIG of worker `index` in a cluster of workers on 127.0.0.1 at `ports`."""
    return json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
        "task": {"type": "worker", "index": index},
    })


class Processes:
    """Start training processes and stop them all, whatever happens: use as a context manager.

    Example:

    ```python
    with Processes(tmp_path) as processes:
        processes.start("worker-0", [out], tf_config=tf_config(ports, 0))
        processes.wait(["worker-0"])
    ```
    """

    def __init__(self, log_dir):
        self.log_dir = pathlib.Path(log_dir)
        self.running = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for process in self.running.values():
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
        for process in self.running.values():
            process.wait(timeout=30)

    def start(self, name, args, tf_config=None):
        """Run fit_worker.py with `args` (a list of str); its output goes to log_dir/name.log."""
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "", "PYTHONHASHSEED": "0"}
        env.pop("TF_CONFIG", None)
        if tf_config:
            env["TF_CONFIG"] = tf_config
        log = open(self.log_dir / f"{name}.log", "w")
        self.running[name] = subprocess.Popen(
            [sys.executable, str(FIT_WORKER), *map(str, args)], cwd=REPOSITORY, env=env, stdout=log,
            stderr=subprocess.STDOUT, preexec_fn=_die_with_the_test,
        )
        log.close()
        return self.running[name]

    def log(self, name):
        """The end of a process's output, without TensorFlow's start-up chatter."""
        text = (self.log_dir / f"{name}.log").read_text()
        return "\n".join(line for line in text.splitlines() if not line.startswith(("I0000", "W0000")))[-5000:]

    def wait(self, names):
        """Wait for the named processes to exit, all within PROCESS_SECONDS of now; fail unless each succeeds."""
        deadline = time.monotonic() + PROCESS_SECONDS
        for name in names:
            try:
                code = self.running[name].wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{name} ran over {PROCESS_SECONDS} s:\n{self.log(name)}") from None
            if code != 0:
                raise AssertionError(f"{name} exited with {code}:\n{self.log(name)}")

    def wait_for_file(self, path, names):
        """Wait until `path` exists while the named processes run; fail if one of them exits first."""
        deadline = time.monotonic() + PROCESS_SECONDS
        while not pathlib.Path(path).exists():
            for name in names:
                if self.running[name].poll() is not None:
                    raise AssertionError(f"{name} exited with {self.running[name].returncode} before {path} "
                                         f"appeared:\n{self.log(name)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} did not appear within {PROCESS_SECONDS} s.")
            time.sleep(0.2)

    def kill(self, names):
        """SIGKILL the named processes and wait for them to be gone."""
        for name in names:
            self.running[name].send_signal(signal.SIGKILL)
        for name in names:
            assert self.running[name].wait(timeout=30) == -signal.SIGKILL


def load(path):
    """What fit_worker.py saved: a dict with "weights" (a list of arrays) and its other results."""
    with np.load(path) as saved:
        data = {key: saved[key] for key in saved.files}
    weights = [data.pop(f"arr_{index}") for index in range(sum(key.startswith("arr_") for key in data))]
    return {"weights": weights, **{key: value[()] if value.ndim == 0 else value for key, value in data.items()}}


def assert_same_training(result, reference, atol=1e-6, rtol=1e-5, first_epoch=0):
    """Weights, per-epoch losses, evaluation and predictions agree to float32 tolerance; `result` may have run the
    reference's epochs from `first_epoch` on only (a resumed run)."""
    assert len(result["weights"]) == len(reference["weights"])
    for got, expected in zip(result["weights"], reference["weights"]):
        np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol)
    np.testing.assert_allclose(result["losses"], reference["losses"][first_epoch:], rtol=rtol)
    np.testing.assert_allclose(result["evaluate_loss"], reference["evaluate_loss"], rtol=rtol)
    np.testing.assert_allclose(result["evaluate_accuracy"], reference["evaluate_accuracy"], rtol=rtol)
    np.testing.assert_allclose(result["predictions"], reference["predictions"], atol=10 * atol, rtol=rtol)
