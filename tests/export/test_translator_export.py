import json
import os
import subprocess
import sys

import keras
import pytest
import tensorflow as tf

from kzoo.data import multi30k
from kzoo.export import export_translator, new_version, next_version
from kzoo.models import Transformer
from kzoo.text import SubwordTokenizer
from kzoo.translator import Translator

SENTENCES = [
    "A man in a blue shirt is standing on a ladder.",
    "",
    "Two dogs play in the snow " * 40,
    "Ünïcödé ☃ 日本語 😀 \u200b\t!",
]

LOAD_AND_TRANSLATE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the tf-text ops the graph uses, as TF Serving links them in
loaded = tf.saved_model.load(sys.argv[1])
serve = loaded.signatures["serving_default"]
texts = json.loads(sys.argv[2])
out = serve(text=tf.constant(texts, tf.string))["translation"]
empty = serve(text=tf.constant([], tf.string))["translation"]
print(json.dumps({
    "translations": [t.decode("utf-8") for t in out.numpy()],
    "empty_shape": empty.shape.as_list(),
    "inputs": {k: [v.dtype.name, v.shape.as_list()] for k, v in serve.structured_input_signature[1].items()},
    "outputs": {k: [v.dtype.name, v.shape.as_list()] for k, v in serve.structured_outputs.items()},
    "kzoo_imported": "kzoo" in sys.modules,
}))
"""


@pytest.fixture(scope="module")
def translator():
    english, german = multi30k("val")
    tokenizer = SubwordTokenizer.train(english + german, vocabulary_size=600)
    keras.utils.set_random_seed(11)
    model = Transformer(tokenizer.vocabulary_size, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=32,
                        num_heads=2, intermediate_dim=64, share_embeddings=True)
    return Translator(model, tokenizer, method="beam", beam_size=3, max_source_length=24)


def translation_run(run, translator):
    """A finished translation-recipe run folder holding `translator`'s model and tokenizer (beam 3, α 0.6)."""
    from kzoo.train.run import Run

    with Run(run, "kzoo.train.translation_recipe", {"beam_size": 3, "length_penalty": 0.6, "max_length": 24}):
        translator.model.save(run / "model.keras")
        translator.tokenizer.save(run / "tokenizer.model")
    return run


def test_exported_model_runs_in_a_fresh_process_without_kzoo(tmp_path, translator):
    path = export_translator(translator, tmp_path / "translator")
    assert str(path).endswith("/1") and sorted(os.listdir(tmp_path / "translator")) == ["1"]
    result = subprocess.run([sys.executable, "-c", LOAD_AND_TRANSLATE, str(path), json.dumps(SENTENCES)],
                            capture_output=True, text=True, timeout=300, check=True)
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served["translations"] == translator(SENTENCES)
    assert served["empty_shape"] == [0]
    assert served["inputs"] == {"text": ["string", [None]]}
    assert served["outputs"] == {"translation": ["string", [None]]}
    assert not served["kzoo_imported"]


def test_graph_has_no_python_ops(tmp_path, translator):
    path = export_translator(translator, tmp_path / "translator")
    loaded = tf.saved_model.load(str(path))
    graph = loaded.signatures["serving_default"].graph.as_graph_def()
    ops = {node.op for node in graph.node}
    for function in graph.library.function:
        ops |= {node.op for node in function.node_def}
    assert "SentencepieceTokenizeOp" in ops and "While" in ops or "StatelessWhile" in ops
    assert not ops & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}


def test_odd_inputs_give_strings_and_batching_does_not_change_translations(translator):
    batched = translator(SENTENCES)
    assert all(isinstance(t, str) for t in batched)
    assert batched == [translator([s])[0] for s in SENTENCES]
    assert translator([]) == []


def test_versions_are_written_whole_and_never_overwritten(tmp_path):
    with new_version(tmp_path, 1) as staging:
        (staging / "saved_model.pb").write_text("x")
    assert sorted(os.listdir(tmp_path)) == ["1"]
    with pytest.raises(FileExistsError, match="pass version=2"):
        with new_version(tmp_path, 1):
            pass
    with pytest.raises(RuntimeError):
        with new_version(tmp_path, 2) as staging:
            (staging / "half").write_text("x")
            raise RuntimeError("export failed half way")
    assert sorted(os.listdir(tmp_path)) == ["1"] and next_version(tmp_path) == 2


def test_cli_exports_a_training_run(tmp_path, translator):
    from kzoo.export.__main__ import main

    run = translation_run(tmp_path / "run", translator)
    main(["--run", str(run), "--output", str(tmp_path / "exported")])
    serve = tf.saved_model.load(str(tmp_path / "exported" / "1")).signatures["serving_default"]
    served = [t.decode() for t in serve(text=tf.constant(SENTENCES[:2]))["translation"].numpy()]
    assert served == translator(SENTENCES[:2])


def test_cli_exports_a_training_run_with_other_beam_settings(tmp_path, translator, capsys):
    from kzoo.export.__main__ import main

    run = translation_run(tmp_path / "run", translator)
    for flags, fix in ((["--beam-size", "0"], "--beam-size 0 must be a positive integer"),
                       (["--length-penalty", "-1"], "--length-penalty -1.0 must be 0 or more")):
        with pytest.raises(SystemExit):
            main(["--run", str(run), "--output", str(tmp_path / "exported"), *flags])
        assert fix in capsys.readouterr().err
    assert not (tmp_path / "exported").exists()  # refused before any work
    main(["--run", str(run), "--output", str(tmp_path / "exported"), "--beam-size", "2", "--length-penalty", "1.0",
          "--early-stopping"])
    settings = json.loads((tmp_path / "exported" / "1" / "assets.extra" / "translator.json").read_text())["settings"]
    assert (settings["beam_size"], settings["length_penalty"], settings["early_stopping"]) == (2, 1.0, True)
    narrower = Translator(translator.model, translator.tokenizer, method="beam", beam_size=2, length_penalty=1.0,
                          max_source_length=24, early_stopping=True)
    serve = tf.saved_model.load(str(tmp_path / "exported" / "1")).signatures["serving_default"]
    served = [t.decode() for t in serve(text=tf.constant(SENTENCES))["translation"].numpy()]
    assert served == narrower(SENTENCES)


def test_cli_exports_a_training_run_from_a_fresh_process(tmp_path, translator):
    # `python -m kzoo.export` imports no model module of its own: loading model.keras must register kzoo's classes
    # (the in-process test above passes whatever this process imported before it).
    run = translation_run(tmp_path / "run", translator)
    completed = subprocess.run([sys.executable, "-m", "kzoo.export", "--run", str(run), "--output",
                                str(tmp_path / "exported")], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip().splitlines()[-1] == str(tmp_path / "exported" / "1")
    described = json.loads((tmp_path / "exported" / "1" / "assets.extra" / "translator.json").read_text())
    assert (described["settings"]["beam_size"], described["settings"]["max_source_length"]) == (3, 24)
