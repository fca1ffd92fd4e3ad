import pathlib

import pytest

from kzoo.data import WIKITEXT2_VOCABULARY, resolve_data_path, shipped, shipped_file, shipped_model

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]


def test_in_a_checkout_the_shipped_files_are_the_repositorys_own():
    assert shipped.SHIPPED_DIR == REPOSITORY
    assert shipped_file("wikitext2/vocab.txt") == REPOSITORY / "data" / "wikitext2" / "vocab.txt"
    assert shipped_file("glue/MRPC") == REPOSITORY / "data" / "glue" / "MRPC"
    assert shipped_model("transformer_multi30k_en_de") == REPOSITORY / "saved_models" / "transformer_multi30k_en_de"


def test_recorded_names_resolve_to_shipped_files_and_users_paths_stay_as_given():
    assert WIKITEXT2_VOCABULARY == "kzoo:wikitext2/vocab.txt"
    assert resolve_data_path(WIKITEXT2_VOCABULARY) == shipped_file("wikitext2/vocab.txt")
    assert resolve_data_path("runs/x/vocab.txt") == pathlib.Path("runs/x/vocab.txt")  # relative, as given
    assert resolve_data_path(pathlib.Path("/data/vocab.txt")) == pathlib.Path("/data/vocab.txt")


@pytest.mark.parametrize("name, error, message", [
    ("wikitext2/vocab.text", FileNotFoundError, r"kzoo ships no file 'wikitext2/vocab.text'.*'vocab.txt'"),
    ("", ValueError, "must be a relative path"),
    ("/etc/passwd", ValueError, "must be a relative path"),
    ("../setup.cfg", ValueError, "must be a relative path"),
])
def test_names_kzoo_does_not_ship_are_clear_errors(name, error, message):
    with pytest.raises(error, match=message):
        shipped_file(name)


def test_a_missing_model_names_the_shipped_ones():
    with pytest.raises(FileNotFoundError, match=r"kzoo ships no model 'transformer_en_fr'.*transformer_multi30k_en_de"):
        shipped_model("transformer_en_fr")
    with pytest.raises(FileNotFoundError, match="kzoo ships no file 'nothing'"):
        resolve_data_path("kzoo:nothing")


def test_without_installed_package_data_the_error_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(shipped, "SHIPPED_DATA_DIR", tmp_path / "data")
    with pytest.raises(FileNotFoundError, match=r"data is missing, so kzoo's shipped files cannot be found: install"):
        shipped_file("multi30k")
