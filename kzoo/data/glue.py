"""GLUE classification tasks from GLUE-format TSV files: SST-2 (single sentences) and MRPC (sentence pairs)."""

import csv
import dataclasses
import gzip
import hashlib
import pathlib
from typing import NamedTuple

from kzoo.data.shipped import shipped_file

# kzoo ships SST-2 and MRPC (see data/glue/SOURCE.md) as shipped_file("glue"), in GLUE's folder layout:
# <task dir>/<split>.tsv.gz.
GLUE_SPLITS = ("train", "dev")


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """The layout of one GLUE task's files.

    `columns` are the column names in file order; with `has_header` the first line must repeat them (CoLA's files
    have no header). `text`, `second_text` (None for single-sentence tasks) and `label` name the columns to read.
    `label_values` are the label column's values in class-id order, `label_names` a readable name for each class, and
    `sha256` the checksum of each split's shipped .tsv.gz file.

    Example:
    ```python
    import gzip
    from kzoo.data.glue import GlueTask, read_glue_tsv

    # CoLA's layout: four columns, no header line.
    cola = GlueTask("CoLA", ("source", "label", "original", "sentence"), "sentence", None, "label", ("0", "1"),
                    ("unacceptable", "acceptable"), sha256={}, has_header=False)
    with gzip.open("train.tsv.gz", "wt", encoding="utf-8") as handle:
        handle.write("gj04\\t1\\t\\tOur friends won't buy this analysis.\\n")
    examples = read_glue_tsv("train.tsv.gz", cola)
    assert examples.texts == ["Our friends won't buy this analysis."] and examples.labels == [1]
    ```
    """

    directory: str
    columns: tuple
    text: str
    second_text: str | None
    label: str
    label_values: tuple
    label_names: tuple
    sha256: dict
    has_header: bool = True


GLUE_TASKS = {
    "sst2": GlueTask(
        "SST-2", ("sentence", "label"), "sentence", None, "label", ("0", "1"), ("negative", "positive"),
        {"train": "1c4843303462f8f93e006ff618a9e61d207468cafd030046d7d7fd6b78af342b",
         "dev": "19553efc6f7bac0b7fdd37d4e29dc37c15e9e779767249a16f857fbfcedb23fa"},
    ),
    "mrpc": GlueTask(
        "MRPC", ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"), "#1 String", "#2 String", "Quality",
        ("0", "1"), ("not_equivalent", "equivalent"),
        {"train": "0f9e1b9dbd3dd77773b9bc79c0c1af0f0403204c55409873526274ef1516ccbc",
         "dev": "363852271840c122aefed7b7b9579032a415e719ddf890ad4a03b4ff5ee00403"},
    ),
}


class GlueExamples(NamedTuple):
    """One split of a GLUE task: `texts`, `second_texts` (None for single-sentence tasks), `labels` as class ids, and
    `label_names`, the name of each class id.

    Example:
    ```python
    sst2 = kzoo.data.glue("sst2", "dev")
    assert isinstance(sst2, kzoo.data.GlueExamples) and sst2.second_texts is None
    assert sst2.label_names == ("negative", "positive") and set(sst2.labels) == {0, 1}
    ```
    """

    texts: list
    second_texts: list | None
    labels: list
    label_names: tuple


def glue_file(task, split, data_dir=None):
    """The path of a GLUE task's split (`<data_dir>/<task dir>/<split>.tsv.gz`), checked against its sha256.

    Example:
    ```python
    from kzoo.data.glue import glue_file

    path = glue_file("mrpc", "train")  # the shipped copy; data_dir= for a folder laid out like GLUE's download
    assert (path.parent.name, path.name) == ("MRPC", "train.tsv.gz")
    ```
    """
    if task not in GLUE_TASKS:
        raise ValueError(f"task={task!r} is not a shipped GLUE task; use one of {tuple(GLUE_TASKS)}.")
    if split not in GLUE_SPLITS:
        raise ValueError(f"split={split!r} is not a GLUE split with labels; use one of {GLUE_SPLITS}.")
    spec = GLUE_TASKS[task]
    data_dir = pathlib.Path(data_dir) if data_dir else shipped_file("glue")
    path = data_dir / spec.directory / f"{split}.tsv.gz"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: put GLUE's {spec.directory}/{split}.tsv, gzipped, in {data_dir / spec.directory}, or "
            "pass data_dir=."
        )
    expected = spec.sha256[split]
    if hashlib.sha256(path.read_bytes()).hexdigest() != expected:
        raise ValueError(f"{path} does not have the sha256 of the shipped file ({expected}); fetch it again.")
    return path


def read_glue_tsv(path, spec):
    """The examples of one GLUE-format .tsv.gz file laid out as `spec` (a `GlueTask`) says.

    Fields are split on tabs with quoting off: GLUE's text holds `"` characters, even at the start of a field, and a
    quoting reader would swallow them. A byte order mark before the header (MRPC has one) is dropped.

    Example:
    ```python
    from kzoo.data.glue import GLUE_TASKS, glue_file, read_glue_tsv

    examples = read_glue_tsv(glue_file("sst2", "dev"), GLUE_TASKS["sst2"])
    assert examples == kzoo.data.glue("sst2", "dev") and len(examples.texts) == 872
    ```
    """
    text, label = spec.columns.index(spec.text), spec.columns.index(spec.label)
    second = spec.columns.index(spec.second_text) if spec.second_text else None
    texts, second_texts, labels = [], [], []
    with gzip.open(path, "rt", encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        if spec.has_header:
            header = tuple(next(reader, ()))
            if header != spec.columns:
                raise ValueError(f"{path} starts with {header}, not GLUE {spec.directory}'s header {spec.columns}.")
        for row in reader:
            if len(row) != len(spec.columns):
                raise ValueError(
                    f"{path} line {reader.line_num} has {len(row)} tab-separated fields, not the {len(spec.columns)} "
                    f"of GLUE {spec.directory} {spec.columns}."
                )
            if row[label] not in spec.label_values:
                raise ValueError(
                    f"{path} line {reader.line_num} has label {row[label]!r}; GLUE {spec.directory}'s labels are "
                    f"{spec.label_values}."
                )
            texts.append(row[text])
            labels.append(spec.label_values.index(row[label]))
            if second is not None:
                second_texts.append(row[second])
    return GlueExamples(texts, second_texts if second is not None else None, labels, spec.label_names)


def glue(task, split, data_dir=None):
    """One split of a GLUE classification task, read exactly as written (SST-2 sentences keep their final space).

    Args:
        task: str. `"sst2"` (sentiment of one sentence; 67,349 train and 872 dev examples) or `"mrpc"` (whether two
            sentences are paraphrases; 3,668 train and 408 dev pairs).
        split: str. `"train"` or `"dev"`; GLUE's test labels are not public.
        data_dir: path. A folder laid out like GLUE's download (`SST-2/train.tsv.gz`, ...), holding the same files.
            Defaults to the copy kzoo ships (`shipped_file("glue")`).

    Returns:
        A `GlueExamples(texts, second_texts, labels, label_names)`; `second_texts` is None for SST-2.

    Example:
    ```python
    pairs = kzoo.data.glue("mrpc", "dev")
    assert len(pairs.texts) == len(pairs.second_texts) == len(pairs.labels) == 408
    print(pairs.texts[0], "|", pairs.second_texts[0], "->", pairs.label_names[pairs.labels[0]])
    ```
    """
    return read_glue_tsv(glue_file(task, split, data_dir), GLUE_TASKS[task])
