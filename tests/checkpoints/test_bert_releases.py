"""The registry of Google's BERT releases and its download cache, served from local file:// URLs."""

import hashlib
import io
import json
import re
import threading
import urllib.error
import urllib.request
import warnings
import zipfile

import numpy as np
import pytest

from kzoo.checkpoints import bert_releases
from kzoo.models import Bert, bert_small, bert_tiny
from tests.checkpoints.bert_checkpoint_files import huggingface_tensors, to_google, write_google, zip_folder

NAME = "uncased_L-2_H-128_A-2"  # BERT-Tiny; the test archive has its sizes and a 40-token vocabulary
CONFIG = dict(vocab_size=40, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512,
              max_position_embeddings=16, type_vocab_size=2, hidden_act="gelu", hidden_dropout_prob=0.1,
              attention_probs_dropout_prob=0.1, initializer_range=0.02)


@pytest.fixture()
def mirror(tmp_path, monkeypatch):
    """A local copy of Google's bucket holding a BERT-Tiny-sized archive, and an empty cache."""
    folder = write_google(tmp_path / "checkpoint", to_google(huggingface_tensors(CONFIG)), CONFIG)
    zip_folder(folder, tmp_path / "bucket" / "2020_02_20" / f"{NAME}.zip")
    monkeypatch.setattr(bert_releases, "BASE_URL", (tmp_path / "bucket").as_uri())
    monkeypatch.setenv("KZOO_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def cached_files(mirror):
    return sorted(p.relative_to(mirror / "cache") for p in (mirror / "cache").rglob("*") if p.is_file())


def refuse_network(monkeypatch):
    def urlopen(url, *args, **kwargs):
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)


def test_registry_holds_the_published_releases():
    compact = [f"uncased_L-{layers}_H-{h}_A-{h // 64}" for layers in (2, 4, 6, 8, 10, 12) for h in (128, 256, 512, 768)]
    assert all(bert_releases.find_release(name) for name in compact) and len(compact) == 24
    small = bert_releases.find_release("uncased_L-4_H-512_A-8")
    assert small.url == "https://storage.googleapis.com/bert_models/2020_02_20/uncased_L-4_H-512_A-8.zip"
    assert small.sizes == {"num_layers": 4, "hidden_dim": 512, "num_heads": 8}
    base = bert_releases.find_release("uncased_L-12_H-768_A-12")  # the 2018 original, not the 2020 re-training
    assert base.url == "https://storage.googleapis.com/bert_models/2018_10_18/uncased_L-12_H-768_A-12.zip"
    assert bert_releases.find_release("2020_02_20/uncased_L-12_H-768_A-12").date == "2020_02_20"
    for name in ("cased_L-12_H-768_A-12", "uncased_L-24_H-1024_A-16", "cased_L-24_H-1024_A-16"):
        assert bert_releases.find_release(name).date == "2018_10_18"


def test_cache_dir_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KZOO_CACHE_DIR", str(tmp_path))
    assert bert_releases.cache_dir() == tmp_path
    monkeypatch.delenv("KZOO_CACHE_DIR")
    assert str(bert_releases.cache_dir()).endswith(".cache/kzoo")


@pytest.mark.parametrize("top_folder", [None, NAME])  # the 2020 archives hold bare files, the 2018 ones a folder
def test_download_once_then_load_from_the_cache(mirror, monkeypatch, top_folder):
    if top_folder:
        zip_folder(mirror / "checkpoint", mirror / "bucket" / "2020_02_20" / f"{NAME}.zip", top_folder)
    folder = bert_releases.fetch(NAME)
    assert folder == mirror / "cache" / "bert_models" / "2020_02_20" / NAME
    assert [str(p) for p in cached_files(mirror)] == [
        f"bert_models/2020_02_20/{NAME}/{name}"
        for name in ("bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index", "vocab.txt")
    ]
    refuse_network(monkeypatch)  # a second use must not download
    model = bert_tiny(weights=NAME)
    direct = Bert.from_checkpoint(mirror / "checkpoint")
    for a, b in zip(model.weights, direct.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert model.name == "bert_tiny" and model.vocabulary_size == 40


def test_truncated_download_leaves_nothing_in_the_cache(mirror):
    archive = mirror / "bucket" / "2020_02_20" / f"{NAME}.zip"
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(ValueError, match=r"did not download as a whole zip archive.*Nothing was cached"):
        bert_releases.fetch(NAME)
    assert cached_files(mirror) == []
    assert not (mirror / "cache" / "bert_models" / "2020_02_20" / NAME).exists()


def test_interrupted_download_leaves_nothing_in_the_cache(mirror, monkeypatch):
    class Interrupted(io.BytesIO):
        headers = {"Content-Length": "4096"}

        def read(self, size=-1):
            if self.tell():
                raise ConnectionResetError("connection reset by peer")
            return super().read(1024)

    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: Interrupted(b"x" * 4096))
    with pytest.raises(OSError, match="connection reset by peer"):
        bert_releases.fetch(NAME)
    assert cached_files(mirror) == []


def test_offline_error_says_what_to_download_and_where(mirror, monkeypatch):
    refuse_network(monkeypatch)
    folder = mirror / "cache" / "bert_models" / "2020_02_20" / NAME
    url = f"{bert_releases.BASE_URL}/2020_02_20/{NAME}.zip"
    with pytest.raises(OSError) as error:
        bert_small(weights="uncased_L-4_H-512_A-8")
    assert "uncased_L-4_H-512_A-8.zip" in str(error.value) and "network is unreachable" in str(error.value)
    with pytest.raises(OSError) as error:
        bert_releases.fetch(NAME)
    assert url in str(error.value) and f"lie directly in {folder}" in str(error.value)
    assert cached_files(mirror) == []


def test_sha256_is_checked_when_known(mirror, monkeypatch):
    archive = mirror / "bucket" / "2020_02_20" / f"{NAME}.zip"
    wrong = bert_releases.Release("2020_02_20", NAME, sha256="0" * 64)
    with pytest.raises(ValueError, match=r"has SHA-256 [0-9a-f]{64}, not the published 0{64}"):
        bert_releases.fetch(wrong)
    assert cached_files(mirror) == []
    right = bert_releases.Release("2020_02_20", NAME, sha256=hashlib.sha256(archive.read_bytes()).hexdigest())
    assert (bert_releases.fetch(right) / "bert_config.json").is_file()


def test_archive_of_another_size_is_rejected(mirror, monkeypatch):
    release = bert_releases.Release("2020_02_20", "uncased_L-4_H-128_A-2")
    monkeypatch.setitem(bert_releases.RELEASES, release.name, release)
    zip_folder(mirror / "checkpoint", mirror / "bucket" / "2020_02_20" / "uncased_L-4_H-128_A-2.zip")
    with pytest.raises(ValueError, match=r"describes \{'num_layers': 2, .* but the name promises \{'num_layers': 4"):
        bert_releases.fetch("uncased_L-4_H-128_A-2")
    assert cached_files(mirror) == []


def test_preset_of_another_size_fails_before_downloading(mirror, monkeypatch):
    refuse_network(monkeypatch)
    with pytest.raises(ValueError, match=r"bert_small is .*'hidden_dim': 512.* but the release 'uncased_L-2_H-128"):
        bert_small(weights=NAME)


def test_unknown_name_and_incomplete_cache_folder(mirror):
    with pytest.raises(FileNotFoundError, match=r"neither an existing checkpoint folder nor a published BERT release.*"
                                                r"uncased_L-4_H-512_A-8"):
        Bert.from_checkpoint("uncased_L-3_H-100_A-1")
    folder = mirror / "cache" / "bert_models" / "2020_02_20" / NAME
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("[PAD]\n")
    with pytest.raises(FileExistsError, match="holds no bert_config.json"):
        bert_releases.fetch(NAME)


def bucket_archive(mirror):
    return mirror / "bucket" / "2020_02_20" / f"{NAME}.zip"


def test_an_archive_with_two_configurations_is_refused(mirror):
    archive = bucket_archive(mirror)
    with zipfile.ZipFile(archive, "a") as zip_file:  # a second, different configuration in a subfolder
        zip_file.writestr("other/bert_config.json", json.dumps({**CONFIG, "hidden_size": 4096}))
    with pytest.raises(ValueError, match=r"holds 2 bert_config.json files \(bert_config.json, other/bert_config.json"):
        bert_releases.fetch(NAME)
    assert cached_files(mirror) == []


def test_an_archive_whose_member_names_repeat_is_refused(mirror):
    archive = bucket_archive(mirror)
    with warnings.catch_warnings(), zipfile.ZipFile(archive, "a") as zip_file:
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name, as it should
        zip_file.writestr("bert_config.json", json.dumps({**CONFIG, "vocab_size": 10**9}))
    with pytest.raises(ValueError, match=r"holds bert_config.json more than once"):
        bert_releases.fetch(NAME)
    assert cached_files(mirror) == []


def test_a_flipped_byte_in_compressed_data_names_the_url(mirror):
    archive = bucket_archive(mirror)
    with zipfile.ZipFile(archive) as zip_file:
        info = max(zip_file.infolist(), key=lambda i: i.compress_size)
    data = bytearray(archive.read_bytes())
    start = info.header_offset + 30 + int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little")
    start += int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
    data[start] |= 0b110  # the first deflate block's type becomes 3, which does not exist: zlib.error
    archive.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"{re.escape(bert_releases.BASE_URL)}/2020_02_20/{NAME}.zip did not download "
                                         r"as a whole zip archive \(error: .*invalid block type"):
        bert_releases.fetch(NAME)
    assert cached_files(mirror) == []


def test_an_archive_that_unpacks_far_larger_than_it_is_is_refused(mirror):
    with zipfile.ZipFile(bucket_archive(mirror), "a", zipfile.ZIP_DEFLATED) as zip_file:
        zip_file.writestr("padding.bin", bytes(64 << 20))  # 64 MiB of zeros in about 64 KiB
    with pytest.raises(ValueError, match=r"would unpack \d+ bytes into \d+, more than the \d+ a BERT checkpoint"):
        bert_releases.fetch(NAME)
    assert cached_files(mirror) == []


def test_a_killed_downloads_part_file_is_taken_over_and_removed(mirror):
    models = mirror / "cache" / "bert_models" / "2020_02_20"
    models.mkdir(parents=True)
    (models / f".{NAME}.zip.part").write_bytes(b"PK\x03\x04 half an archive")  # the process was killed
    (models / f".{NAME}.k3j2h1.zip.part").write_bytes(b"older kzoo's random name")
    (models / f".{NAME}.x9y8.part").mkdir()  # killed while unzipping
    (models / ".uncased_L-4_H-512_A-8.zip.part").write_bytes(b"another release's: not touched")
    folder = bert_releases.fetch(NAME)
    assert (folder / "bert_config.json").is_file()
    assert sorted(p.name for p in models.iterdir()) == [".uncased_L-4_H-512_A-8.zip.part", NAME]


def test_an_archive_member_that_would_unzip_outside_its_folder_is_refused(mirror):
    with zipfile.ZipFile(bucket_archive(mirror), "a") as zip_file:
        zip_file.writestr("../../outside.txt", "escaped")
    with pytest.raises(ValueError, match=r"members that would unzip outside their folder: \['../../outside.txt'\]"):
        bert_releases.fetch(NAME)
    assert cached_files(mirror) == [] and not (mirror / "outside.txt").exists()


def test_a_second_fetch_of_the_same_release_waits_for_the_first_and_downloads_nothing(mirror, monkeypatch):
    opened, first_is_downloading, let_it_finish = [], threading.Event(), threading.Event()
    urlopen = urllib.request.urlopen

    def slow_urlopen(url, timeout):
        opened.append(url)
        first_is_downloading.set()
        let_it_finish.wait(timeout=30)
        return urlopen(url, timeout=timeout)

    monkeypatch.setattr(urllib.request, "urlopen", slow_urlopen)
    folders = {}
    first = threading.Thread(target=lambda: folders.setdefault("first", bert_releases.fetch(NAME)))
    second = threading.Thread(target=lambda: folders.setdefault("second", bert_releases.fetch(NAME)))
    first.start()
    assert first_is_downloading.wait(timeout=30)
    second.start()
    second.join(timeout=0.5)
    assert second.is_alive()  # waiting on the download's lock, not downloading a second copy
    let_it_finish.set()
    first.join(timeout=30)
    second.join(timeout=30)
    assert folders["first"] == folders["second"] and (folders["first"] / "bert_config.json").is_file()
    assert len(opened) == 1
    assert not list(folders["first"].parent.glob(".*"))  # no part file or unzip folder left
