import os
import subprocess
import sys

from kzoo.console import startup_lines_kept

BANNER = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
ONEDNN = (b"I0000 00:00:1796161702.152961   24999 port.cc:153] oneDNN custom operations are on. You may see slightly "
          b"different numerical results due to floating-point round-off errors from different computation orders.\n")
CUDART = (b"I0000 00:00:1796161702.153320   24999 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU "
          b"will not be used.\n")
NO_DRIVER = (b"E0000 00:00:1796161708.244414   24999 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
             b"Failed call to cuInit: UNKNOWN ERROR (303)\n")
DRIVER_ERROR = (b"E0000 00:00:1796161708.244414   24999 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA "
                b"error: Failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected\n")
WARNING = b"W0000 00:00:1796161708.244414   24999 some_op.cc:12] a warning\n"
PYTHON = b"<frozen importlib._bootstrap>:241: UserWarning: something Python said\n"
STARTUP = BANNER + ONEDNN + CUDART + PYTHON + BANNER + ONEDNN + CUDART + WARNING + NO_DRIVER + DRIVER_ERROR
MARKERS = ("absl::InitializeLog", "oneDNN custom operations", "cudart_stub", "cuInit: INTERNAL")


def test_start_up_lines_below_the_log_level_are_dropped_and_the_rest_kept_in_order():
    assert startup_lines_kept(STARTUP, min_log_level=2) == PYTHON + DRIVER_ERROR
    assert startup_lines_kept(STARTUP, min_log_level=1) == PYTHON + WARNING + DRIVER_ERROR
    # TF_CPP_MIN_LOG_LEVEL=0 asks for everything: only the error that means "no NVIDIA driver" stays hidden.
    assert startup_lines_kept(STARTUP, min_log_level=0) == STARTUP.replace(NO_DRIVER, b"")
    assert startup_lines_kept(b"no newline at the end", min_log_level=2) == b"no newline at the end"


def run_export(tmp_path, **environment):
    """`python -m kzoo.export` on a checkpoint that does not exist: it imports TensorFlow, then fails."""
    env = {name: value for name, value in os.environ.items() if name not in ("TF_CPP_MIN_LOG_LEVEL", "KZOO_TF_LOGS")}
    command = [sys.executable, "-m", "kzoo.export", "--checkpoint", str(tmp_path / "missing"),
               "--output", str(tmp_path / "out")]
    return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env={**env, **environment})


def test_an_entry_point_keeps_tensorflow_start_up_off_the_terminal(tmp_path):
    quiet = run_export(tmp_path)
    assert quiet.returncode == 1
    assert "is neither an existing checkpoint folder nor a published BERT release" in quiet.stderr  # errors show
    assert not [marker for marker in MARKERS if marker in quiet.stderr], quiet.stderr
    loud = run_export(tmp_path, KZOO_TF_LOGS="1")
    assert loud.returncode == 1
    # absl's banner and the CUDA stub's line appear on every CPU; oneDNN's notice only on Intel CPUs.
    assert all(marker in loud.stderr for marker in (MARKERS[0], MARKERS[2])), loud.stderr
