"""benchmarks/ctranslate2_worker.py: a CTranslate2 model in a child process answers as it does in this one."""

import sys

import pytest

from kzoo.data import multi30k, shipped_model
from kzoo.export import export_ctranslate2
from kzoo.export.ctranslate2_export import ctranslate2_beam_options, translate_ctranslate2
from kzoo.serving.model_config import saved_model_versions
from kzoo.translator import Translator
from tests.train.worker_processes import REPOSITORY

ctranslate2 = pytest.importorskip("ctranslate2")
sys.path.insert(0, str(REPOSITORY / "benchmarks"))
from ctranslate2_worker import CTranslate2Process  # noqa: E402


@pytest.mark.slow  # about half a minute: the worker imports TensorFlow and loads the shipped translator
def test_the_worker_translates_as_the_model_does_in_this_process(tmp_path):
    version = saved_model_versions(shipped_model("transformer_multi30k_en_de"))[-1]
    translator = Translator.load(version)
    folder = export_ctranslate2(translator.model, translator.tokenizer, tmp_path / "float32")
    sentences = multi30k("test_2016_flickr")[0][:12]
    here = translate_ctranslate2(ctranslate2.Translator(str(folder), intra_threads=1), translator.tokenizer,
                                 sentences, max_batch_size=64, **ctranslate2_beam_options(translator))
    worker = CTranslate2Process(folder, "default", version, 1)
    try:
        assert worker.pid > 0
        assert worker.translate(sentences) == here
        assert worker.translate(sentences[:1]) == here[:1]  # one request after another on the same process
        assert worker.translate([]) == []
    finally:
        worker.close()


@pytest.mark.slow
def test_a_worker_that_cannot_load_its_model_says_so(tmp_path):
    version = saved_model_versions(shipped_model("transformer_multi30k_en_de"))[-1]
    with pytest.raises(RuntimeError, match="exited with"):
        CTranslate2Process(tmp_path / "no_such_model", "default", version, 1)
