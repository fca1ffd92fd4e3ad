"""benchmarks/RESULTS.md holds one section per benchmark; each script rewrites its own section only."""

import datetime
import os
import pathlib
import platform
import shlex
import sys
import tempfile

TITLE = "# kzoo benchmark results\n\nEvery number below comes with the command that produced it.\n"


def markers(name):
    """The comment lines that open and close section `name`: `<!-- name:start -->`, `<!-- name:end -->`."""
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def read_section(path, name):
    """The text of section `name` in `path` (between its markers, stripped), or None if `path` has no such section."""
    path = pathlib.Path(path)
    start, end = markers(name)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if start not in text or end not in text:
        return None
    return text[text.index(start) + len(start):text.index(end)].strip()


def replace_section(path, name, text):
    """Put `text` between `<!-- name:start -->` and `<!-- name:end -->` in `path`, keeping the other sections.

    The file is replaced atomically, so a reader never sees it half written.
    """
    path = pathlib.Path(path)
    start, end = markers(name)
    block = f"{start}\n{text.strip()}\n{end}"
    old = path.read_text(encoding="utf-8") if path.exists() else TITLE
    if start in old and end in old:
        new = old[: old.index(start)] + block + old[old.index(end) + len(end) :]
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(new)
    os.replace(temporary, path)


def machine_load(before, after):
    """The sentence that records the machine's load beside a benchmark's figures (no final stop), from two
    `os.getloadavg()` readings: "Machine load (1, 5, 15-minute averages): 0.72, 1.85, 3.59 before, ... after"."""
    return (f"Machine load (1, 5, 15-minute averages): {', '.join(f'{x:.2f}' for x in before)} before, "
            f"{', '.join(f'{x:.2f}' for x in after)} after")


def environment_line():
    """`environment()` as a section's header line: date · `command` · CPU · versions."""
    env = environment()
    return f"{env['date']} · `{env['command']}` · {env['cpu']} · {env['versions']}"


def environment():
    """Date, command, CPU and library versions, for the header of a benchmark's section."""
    import keras
    import keras_hub
    import tensorflow as tf

    import kzoo

    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        platform.processor(),
    )
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(arg) for arg in [".venv/bin/python"] + sys.argv),
        "cpu": f"{cpu}, {os.cpu_count()} logical cores",
        "versions": f"Python {platform.python_version()}, TensorFlow {tf.__version__}, Keras {keras.__version__}, "
        f"keras-hub {keras_hub.__version__}, kzoo {kzoo.__version__}",
    }
