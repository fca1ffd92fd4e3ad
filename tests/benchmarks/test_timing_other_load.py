"""benchmarks/timing.py's OtherLoad: a benchmark's own worker processes are not other load once waited for."""

import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
from timing import OtherLoad  # noqa: E402

BUSY = "import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_a_finished_child_s_cpu_time_counts_as_this_process_s_own():
    _, _, own_before = OtherLoad._now()
    subprocess.run([sys.executable, "-c", BUSY], check=True)  # 1.5 s of CPU in a child, waited for; the parent idles
    _, _, own_after = OtherLoad._now()
    # What OtherLoad subtracts from the machine's busy time grew by the child's 1.5 s (the parent itself used ~0).
    assert 1.4 < own_after - own_before < 3.0
