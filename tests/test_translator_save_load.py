"""Translator.save and Translator.load: a saved folder, a translation run folder and an exported SavedModel version
give back the same translator, in a fresh process too; what is not a translator is refused, naming what is wanted."""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.export import export_translator
from kzoo.train.run import Run
from kzoo.translator import Translator
from tests.tiny_translator import tiny_translator

SENTENCES = ["A man in a blue shirt is standing on a ladder.", "", "Two dogs play in the snow."]

LOAD_AND_TRANSLATE = """
import json, sys
import kzoo
from kzoo.translator import Translator
loaded = [Translator.load(path) for path in sys.argv[2:]]
print(json.dumps([{"translations": t(json.loads(sys.argv[1])), "settings": t.settings()} for t in loaded]))
"""


@pytest.fixture(scope="module")
def translator():
    return tiny_translator(5, method="greedy", beam_size=2, length_penalty=0.3, max_source_length=20,
                           early_stopping=True)


@pytest.fixture(scope="module")
def expected(translator):
    return translator(SENTENCES)


def test_saved_and_exported_translators_load_in_a_fresh_process(tmp_path, translator, expected):
    folder = translator.save(tmp_path / "translator")
    assert sorted(p.name for p in folder.iterdir()) == ["model.keras", "tokenizer.model", "translator.json"]
    version = export_translator(translator, tmp_path / "exported")
    assert sorted(p.name for p in (version / "assets.extra").iterdir()) == ["tokenizer.model", "translator.json"]
    result = subprocess.run([sys.executable, "-c", LOAD_AND_TRANSLATE, json.dumps(SENTENCES), str(folder),
                             str(version)], capture_output=True, text=True, timeout=300, check=True)
    for loaded in json.loads(result.stdout.strip().splitlines()[-1]):
        assert loaded["translations"] == expected
        assert loaded["settings"] == translator.settings()
        assert loaded["settings"]["beam_size"] == 2 and loaded["settings"]["length_penalty"] == 0.3
        assert loaded["settings"]["early_stopping"] is True


def test_save_refuses_a_folder_that_holds_something(tmp_path, translator):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not an empty folder"):
        translator.save(tmp_path / "taken")
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["notes.txt"]


def test_a_model_folder_loads_its_newest_version_with_overrides(tmp_path, translator):
    export_translator(translator, tmp_path / "exported", version=3)
    (tmp_path / "exported" / "README.md").write_text("a model card")
    loaded = Translator.load(tmp_path / "exported", method="beam")
    assert loaded.settings() == {**translator.settings(), "method": "beam"}
    assert [w.path for w in loaded.model.weights] == [w.path for w in translator.model.weights]
    for mine, theirs in zip(loaded.model.weights, translator.model.weights):
        assert (keras.ops.convert_to_numpy(mine) == keras.ops.convert_to_numpy(theirs)).all()


def test_a_finished_translation_run_loads_with_its_decoding_settings(tmp_path, translator, expected):
    run = tmp_path / "run"
    with Run(run, "kzoo.train.translation_recipe", {"beam_size": 2, "length_penalty": 0.3, "max_length": 20,
                                                    "early_stopping": True}):
        translator.model.save(run / "model.keras")
        translator.tokenizer.save(run / "tokenizer.model")
    loaded = Translator.load(run, method="greedy")  # the recipe's runs decode with beam search
    assert (loaded.beam_size, loaded.length_penalty, loaded.max_source_length, loaded.early_stopping) == (
        2, 0.3, 20, True)
    assert loaded(SENTENCES) == expected


def test_an_unfinished_run_and_non_translators_are_refused(tmp_path, translator):
    run = tmp_path / "run"
    with pytest.raises(RuntimeError):
        with Run(run, "kzoo.train.translation_recipe", {"beam_size": 2}):
            translator.model.save(run / "model.keras")
            translator.tokenizer.save(run / "tokenizer.model")
            raise RuntimeError("training failed")
    with pytest.raises(ValueError, match="did not finish"):
        Translator.load(run)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Translator.load(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no translator"):
        Translator.load(tmp_path / "empty")
    version = tmp_path / "bare" / "1"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"")
    with pytest.raises(ValueError, match="without .*assets.extra/translator.json"):
        Translator.load(tmp_path / "bare")
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "translator.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="does not describe a kzoo translator"):
        Translator.load(tmp_path / "odd")


def test_exporting_a_loaded_version_again_writes_the_same_variables(tmp_path, translator):
    # Every variable comes back, dropout's seed generators too, so that a new version of the same weights (a faster
    # decoder, say) stores the same values; exported from a fresh process, the files are byte-identical and git
    # keeps them once (here the checkpoint's object graph differs: this process numbers its seed generators on).
    first = export_translator(translator, tmp_path / "exported", version=1)
    second = export_translator(Translator.load(first), tmp_path / "exported", version=2)
    old, new = (tf.train.load_checkpoint(str(v / "variables" / "variables")) for v in (first, second))
    keys = [key for key in old.get_variable_to_shape_map() if key.startswith("model_variables/")]
    assert len(keys) == len(translator.model.variables) and sorted(keys) == sorted(
        key for key in new.get_variable_to_shape_map() if key.startswith("model_variables/"))
    for key in keys:
        assert np.array_equal(old.get_tensor(key), new.get_tensor(key)), key
