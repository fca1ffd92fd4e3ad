"""Keeping TensorFlow's start-up lines off the terminal of kzoo's commands.

Importing TensorFlow 2.21 writes, from C++ and twice (two of its libraries each log once):

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 ... port.cc:153] oneDNN custom operations are on. You may see slightly different numerical results ...
    I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.

absl writes these before TensorFlow has read `TF_CPP_MIN_LOG_LEVEL`, so that variable cannot hide them; the first
operation then logs `E0000 ... cuda_platform.cc:52] failed call to cuInit: ... UNKNOWN ERROR (303)` on a machine
without an NVIDIA driver (TensorFlow's CUDA stub reports that it could not load libcuda.so.1 as error 303).
`CUDA_VISIBLE_DEVICES=""` does not prevent it: the stub fails before any device is counted. `quiet_tensorflow`
handles each at its source and leaves every other line alone:
- `TF_CPP_MIN_LOG_LEVEL` defaults to 2 (warnings and errors only), which hides cpu_feature_guard's INFO lines; a
  value the user set is kept;
- while TensorFlow's package is imported (and its devices are first listed, where cuInit runs), its stderr goes to
  a temporary file; afterwards every line is written on, except the log lines below the level in effect, absl's
  banner above them (when they are dropped), and cuInit's error 303. Whatever else TensorFlow or Python wrote
  comes out, in order, once the import ends.

Set `KZOO_TF_LOGS=1` to see TensorFlow's start-up exactly as it writes it; `TF_CPP_MIN_LOG_LEVEL=0` keeps the INFO
lines and the banner while still hiding error 303.
"""

import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile

SHOW_LOGS = "KZOO_TF_LOGS"
DEFAULT_LOG_LEVEL = "2"
ABSL_BANNER = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
# absl's prefix: severity, MMDD hh:mm:ss.micros (before absl is initialised: 0000 00:00:<seconds since 1970>), thread,
# file:line]
LOG_LINE = re.compile(rb"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^ \]]+:\d+\] ")
NO_DRIVER = re.compile(rb"^E\d{4} .* cuda_platform\.cc:\d+\] failed call to cuInit: .*UNKNOWN ERROR \(303\)$")
SEVERITIES = b"IWEF"


def startup_lines_kept(output, min_log_level):
    """The lines of TensorFlow's start-up `output` (bytes) that are worth a user's attention.

    Example:
    ```python
    from kzoo.console import startup_lines_kept

    output = (b"I0000 00:00:1796161702.153320   24999 cudart_stub.cc:31] Could not find cuda drivers on your "
              b"machine, GPU will not be used.\\nsomething else\\n")
    assert startup_lines_kept(output, min_log_level=2) == b"something else\\n"
    ```
    """
    kept = []
    for line in output.splitlines(keepends=True):
        text = line.rstrip(b"\r\n")
        log = LOG_LINE.match(text)
        hidden = (
            NO_DRIVER.match(text)
            or (text == ABSL_BANNER and min_log_level > 0)
            or (log and SEVERITIES.index(log.group(1)) < min_log_level)
        )
        if not hidden:
            kept.append(line)
    return b"".join(kept)


class _QuietLoader(importlib.abc.Loader):
    """Executes the `tensorflow` package with file descriptor 2 sent to a temporary file, then writes on the lines
    `startup_lines_kept` keeps."""

    def __init__(self, loader, finder):
        self.loader, self.finder = loader, finder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)  # TensorFlow is imported once per process
        level = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0").strip()
        sys.stderr.flush()
        terminal = os.dup(2)
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                self.loader.exec_module(module)
                module.config.list_physical_devices()  # where cuInit runs: once per process, inside the capture
            finally:
                sys.stderr.flush()
                os.dup2(terminal, 2)
                os.close(terminal)
                captured.seek(0)
                os.write(2, startup_lines_kept(captured.read(), int(level) if level.isdigit() else 0))
                module.__loader__ = module.__spec__.loader = self.loader


class _QuietImport(importlib.abc.MetaPathFinder):
    """Finds the `tensorflow` package as Python would without it, and has `_QuietLoader` execute it."""

    def __init__(self):
        self.searching = False

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow" or self.searching:
            return None
        self.searching = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.searching = False
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader, self)
        return spec


def quiet_tensorflow():
    """Keep TensorFlow's start-up lines off the terminal (see the module docstring), unless `KZOO_TF_LOGS=1`.

    Call it first in a command, before anything imports TensorFlow; it imports nothing itself, so a `--help` that
    never needs TensorFlow stays fast. Called after TensorFlow is imported, it changes nothing.

    Example:
    ```python
    from kzoo.console import quiet_tensorflow

    def main():
        quiet_tensorflow()  # the first line of a command, before anything imports TensorFlow
        import tensorflow as tf

        print(tf.constant([1, 2]) * 2)

    main()
    ```
    """
    if os.environ.get(SHOW_LOGS, "0") not in ("", "0") or "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", DEFAULT_LOG_LEVEL)
    if not any(isinstance(finder, _QuietImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietImport())
