import gzip
import shutil

import pytest

from kzoo.data import glue
from kzoo.data.glue import GLUE_TASKS, GlueTask, glue_file, read_glue_tsv
from kzoo.data.shipped import shipped_file


@pytest.mark.parametrize(
    "task, split, size",
    [("sst2", "train", 67349), ("sst2", "dev", 872), ("mrpc", "train", 3668), ("mrpc", "dev", 408)],
)
def test_shipped_splits_have_the_published_sizes(task, split, size):
    examples = glue(task, split)
    assert len(examples.texts) == len(examples.labels) == size
    assert set(examples.labels) == {0, 1}
    assert (examples.second_texts is None) == (task == "sst2")
    if task == "mrpc":
        assert len(examples.second_texts) == size


def test_sst2_is_read_exactly():
    dev = glue("sst2", "dev")
    assert dev.texts[:2] == ["it 's a charming and often affecting journey . ", "unflinchingly bleak and desperate "]
    assert dev.labels[:2] == [1, 0]
    assert dev.label_names == ("negative", "positive")
    assert sum(dev.labels) == 444  # GLUE's dev split: 444 positive, 428 negative


def test_mrpc_keeps_quotes_and_drops_the_byte_order_mark():
    with gzip.open(glue_file("mrpc", "dev")) as handle:
        assert handle.read(11) == b"\xef\xbb\xbfQuality\t"
    dev = glue("mrpc", "dev")
    # A field that opens with '"' would be read as a quoted field, swallowing tabs and lines, by a quoting reader.
    assert dev.texts[0] == (
        "He said the foodservice pie business doesn 't fit the company 's long-term growth strategy ."
    )
    assert dev.second_texts[0] == '" The foodservice pie business does not fit our long-term growth strategy .'
    assert dev.second_texts[1].startswith('His wife said he was " 100 percent behind George Bush "')
    assert dev.labels[:2] == [1, 0] and sum(dev.labels) == 279
    assert dev.label_names[1] == "equivalent"
    train = glue("mrpc", "train")
    assert train.texts[0] == (
        'Amrozi accused his brother , whom he called " the witness " , of deliberately distorting his evidence .'
    )
    assert sum('"' in text for text in train.texts + train.second_texts) > 500


def test_bad_names_missing_or_changed_files_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="task='cola'"):
        glue("cola", "train")
    with pytest.raises(ValueError, match="split='test'"):
        glue("sst2", "test")
    with pytest.raises(FileNotFoundError, match="MRPC/dev.tsv.gz is missing"):
        glue_file("mrpc", "dev", data_dir=tmp_path)
    (tmp_path / "SST-2").mkdir()
    shutil.copy(shipped_file("glue/SST-2/dev.tsv.gz"), tmp_path / "SST-2" / "dev.tsv.gz")
    assert glue("sst2", "dev", data_dir=tmp_path) == glue("sst2", "dev")
    with gzip.open(tmp_path / "SST-2" / "dev.tsv.gz", "wt", encoding="utf-8") as handle:
        handle.write("sentence\tlabel\nfine .\t1\n")
    with pytest.raises(ValueError, match="sha256"):
        glue("sst2", "dev", data_dir=tmp_path)


def test_a_table_row_describes_a_task_and_malformed_rows_are_named(tmp_path):
    cola = GlueTask("CoLA", ("source", "label", "original_label", "sentence"), "sentence", None, "label", ("0", "1"),
                    ("unacceptable", "acceptable"), {}, has_header=False)
    path = tmp_path / "cola.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        # CoLA has no header, and its dev file no final newline.
        handle.write("gj04\t1\t\tOur friends won't buy this analysis , let alone the next one .\n")
        handle.write('clc95\t0\t*\t"Fred" ate.')
    examples = read_glue_tsv(path, cola)
    assert examples.texts == ["Our friends won't buy this analysis , let alone the next one .", '"Fred" ate.']
    assert examples.labels == [1, 0] and examples.second_texts is None
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("gj04\t1\t\tOne .\ngj04\tyes\t\tTwo .\n")
    with pytest.raises(ValueError, match="line 2 has label 'yes'"):
        read_glue_tsv(path, cola)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("gj04\t1\tOne .\n")
    with pytest.raises(ValueError, match="line 1 has 3 tab-separated fields, not the 4"):
        read_glue_tsv(path, cola)
    with pytest.raises(ValueError, match="not GLUE SST-2's header"):
        read_glue_tsv(path, GLUE_TASKS["sst2"])
