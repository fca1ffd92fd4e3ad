"""README's Python blocks run as written.

Every ```python block of README.md runs on its own, in a fresh namespace (it imports what it uses) and a temporary
working folder, unless the line before it is the HTML comment `<!-- fragment -->`, which marks a block that shows
part of a program and cannot run alone; the test skips exactly those. Some blocks also have their results checked.
"""

import pathlib
import re
from typing import NamedTuple

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
FRAGMENT = "<!-- fragment -->"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
ANY_BLOCK = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^#+ (.+)$", re.M)


class Block(NamedTuple):
    heading: str
    line: int
    code: str
    fragment: bool


def python_blocks(text):
    """The ```python blocks of a Markdown text, each with the heading of its section and its first line."""
    blocks = []
    for match in PYTHON_BLOCK.finditer(text):
        before = text[:match.start()]
        headings = HEADING.findall(ANY_BLOCK.sub("", before))  # not the comments of shell blocks
        preceding = before.rstrip("\n").rsplit("\n", 1)[-1]
        blocks.append(Block(headings[-1] if headings else "", before.count("\n") + 2, match.group(1),
                            preceding.strip() == FRAGMENT))
    return blocks


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def ten_lines(namespace):
    assert namespace["weights"].shape == (1, 8, 6, 6)  # attention weights: (batch, heads, queries, keys)
    assert namespace["model"].count_params() > 0


# Section heading -> a check of the namespace its block leaves.
CHECKS = {"Ten lines": ten_lines}


def test_python_blocks_are_found_with_their_sections():
    assert BLOCKS, "README.md has no python block"
    headings = {block.heading for block in BLOCKS}
    assert set(CHECKS) <= headings, f"README has no python block under {sorted(set(CHECKS) - headings)}"
    example = python_blocks(f"## A\n\n{FRAGMENT}\n```python\nx = 1\n```\n\n## B\n```sh\n# not a heading\n```\n"
                            "```python\ny = 2\n```\n")
    assert example == [Block("A", 5, "x = 1\n", True), Block("B", 13, "y = 2\n", False)]


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{block.heading} (README.md:{block.line})" for block in BLOCKS])
def test_python_block_runs_as_written(block, tmp_path, monkeypatch):
    if block.fragment:
        pytest.skip(f"marked {FRAGMENT}")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__readme__"}
    exec(compile(block.code, f"{README}:{block.line}", "exec"), namespace)
    if block.heading in CHECKS:
        CHECKS[block.heading](namespace)
