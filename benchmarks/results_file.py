"""benchmarks/RESULTS.md holds one section per benchmark; each script rewrites its own section only."""

import os
import pathlib
import tempfile

TITLE = "# kzoo benchmark results\n\nEvery number below comes with the command that produced it.\n"


def replace_section(path, name, text):
    """Put `text` between `<!-- name:start -->` and `<!-- name:end -->` in `path`, keeping the other sections.

    The file is replaced atomically, so a reader never sees it half written.
    """
    path = pathlib.Path(path)
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
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
