import gzip

import pytest

from kzoo.data import multi30k, read_parallel
from kzoo.data.parallel_text import multi30k_files


def test_shipped_multi30k_has_the_published_sizes():
    for split, size in (("train", 29000), ("val", 1014), ("test_2016_flickr", 1000)):
        english, german = multi30k(split)
        assert len(english) == len(german) == size
    english, german = multi30k("val")
    assert english[0] and german[0] and "\n" not in english[0]


def test_reads_a_users_plain_and_gzip_files(tmp_path):
    (tmp_path / "a.en").write_text("Hello.\nTwo dogs.\n", encoding="utf-8")
    with gzip.open(tmp_path / "a.de.gz", "wt", encoding="utf-8") as f:
        f.write("Hallo.\nZwei Hunde.\n")
    pairs = read_parallel(tmp_path / "a.en", tmp_path / "a.de.gz")
    assert pairs == (["Hello.", "Two dogs."], ["Hallo.", "Zwei Hunde."])


def test_misaligned_files_and_bad_splits_are_clear_errors(tmp_path):
    (tmp_path / "a.en").write_text("One.\nTwo.\n")
    (tmp_path / "a.de").write_text("Eins.\n")
    with pytest.raises(ValueError, match="has 2 lines but .* has 1"):
        read_parallel(tmp_path / "a.en", tmp_path / "a.de")
    with pytest.raises(ValueError, match="split='dev'"):
        multi30k("dev")
    with pytest.raises(FileNotFoundError, match="missing"):
        multi30k_files("val", data_dir=tmp_path)
