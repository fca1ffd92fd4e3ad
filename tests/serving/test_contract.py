"""Every kind of kzoo export, loaded as TF Serving loads it (TensorFlow's C API, no TensorFlow Python), answers
REST and gRPC Predict requests with what the Keras model computes."""

import pathlib
import re

import numpy as np
import pytest
import tensorflow as tf

from kzoo.export import sentence_embedding
from kzoo.serving import (
    ContractLoader,
    ServingError,
    grpc_request,
    read_grpc_response,
    read_rest_response,
    rest_request,
    served_models,
)
from kzoo.serving.check import check_contract, version_dirs
from tests.serving.tiny_exports import PAIRS, TEXTS

SAVED_MODELS = pathlib.Path(__file__).resolve().parents[2] / "saved_models"


@pytest.fixture(scope="module")
def loaders(exports):
    opened = {kind: ContractLoader(path) for kind, (path, _) in exports.items()}
    yield opened
    for loader in opened.values():
        loader.close()


@pytest.mark.parametrize("kind", ["classifier", "pair_classifier", "embedder", "translator"])
def test_every_kind_meets_the_contract(exports, kind):
    assert check_contract(exports[kind][0]) == []


def test_signatures_are_the_documented_ones(loaders):
    def shapes(kind, side):
        return {k: (v["dtype"], v["shape"]) for k, v in loaders[kind].signatures["serving_default"][side].items()}

    assert shapes("classifier", "inputs") == {"text": ("string", [-1])}
    assert shapes("classifier", "outputs") == {"probabilities": ("float32", [-1, 2]), "label": ("string", [-1])}
    assert shapes("pair_classifier", "inputs") == {"text": ("string", [-1]), "text_pair": ("string", [-1])}
    assert shapes("pair_classifier", "outputs")["probabilities"] == ("float32", [-1, 3])
    assert shapes("embedder", "outputs") == {"embedding": ("float32", [-1, 16])}
    assert shapes("translator", "outputs") == {"translation": ("string", [-1])}


def test_classifier_serves_what_the_keras_model_computes(exports, loaders, preprocessor):
    classifier = exports["classifier"][1]
    expected = tf.nn.softmax(classifier(preprocessor(TEXTS), training=False)).numpy()
    served = read_rest_response(loaders["classifier"].rest(rest_request({"text": TEXTS})))
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)
    assert served["label"] == [["negative", "positive"][i] for i in expected.argmax(-1)]
    columnar = loaders["classifier"].rest(rest_request({"text": TEXTS}, form="inputs"))
    assert columnar["outputs"]["label"] == served["label"]


def test_pair_classifier_serves_pairs(exports, loaders, preprocessor):
    classifier = exports["pair_classifier"][1]
    expected = tf.nn.softmax(classifier(preprocessor(TEXTS, PAIRS), training=False)).numpy()
    served = read_rest_response(loaders["pair_classifier"].rest(rest_request({"text": TEXTS, "text_pair": PAIRS})))
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)
    with pytest.raises(ServingError, match="one entry per example"):
        loaders["pair_classifier"].rest({"inputs": {"text": TEXTS, "text_pair": PAIRS[:2]}})


def test_embedder_serves_unit_mean_pooled_vectors(exports, loaders, preprocessor):
    backbone = exports["embedder"][1]
    expected = sentence_embedding(backbone, preprocessor(TEXTS)).numpy()  # untrimmed: trimming must not matter
    served = read_rest_response(loaders["embedder"].rest(rest_request({"text": TEXTS})), output_name="embedding")
    np.testing.assert_allclose(served["embedding"], expected, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(served["embedding"], axis=-1), 1.0, atol=1e-5)


def test_translator_serves_what_the_translator_translates(exports, loaders):
    translator = exports["translator"][1]
    served = read_rest_response(loaders["translator"].rest(rest_request({"text": TEXTS})), output_name="translation")
    assert served["translation"] == translator(TEXTS)


@pytest.mark.parametrize("kind", ["classifier", "pair_classifier", "embedder", "translator"])
def test_grpc_requests_round_trip_through_the_loader(loaders, kind):
    signature = loaders[kind].signatures["serving_default"]
    inputs = {name: TEXTS[:3] for name in signature["inputs"]}
    request = grpc_request(kind, inputs)
    outputs = read_grpc_response(loaders[kind].grpc(request))
    assert sorted(outputs) == sorted(signature["outputs"])
    for name, info in signature["outputs"].items():
        assert outputs[name].shape[0] == 3 and len(outputs[name].shape) == len(info["shape"])
        assert outputs[name].dtype == (object if info["dtype"] == "string" else np.float32)
    only_output = next(iter(signature["outputs"]))
    rest = read_rest_response(loaders[kind].rest(rest_request(inputs, form="inputs")), output_name=only_output)
    for name in outputs:
        expected = rest[name]
        if outputs[name].dtype == object:
            assert outputs[name].tolist() == expected
        else:
            np.testing.assert_allclose(outputs[name], expected, atol=1e-6)


def test_bert_exports_need_tf_serving_2_20_and_the_translator_does_not(loaders):
    audit = loaders["classifier"].audit("2.19.1")
    assert audit.minimum_tf_serving == "2.20.0" and "TFText>RoundRobinTrim" in audit.text_ops
    assert any("RoundRobinTrim" in problem and "2.20.0" in problem for problem in audit.problems)
    assert loaders["classifier"].audit("2.20.0").ok
    translator = loaders["translator"].audit("2.19.1")
    assert translator.ok and translator.minimum_tf_serving == "2.19.1"
    assert "SentencepieceTokenizeOp" in translator.text_ops


def test_audit_sees_ops_inside_while_loop_bodies(loaders):
    # The weights are read inside the decoding loops, whose bodies are functions of the graph's library (named
    # while_body_N, or while_1_while_body_N for the beam loop nested in the sub-batch loop).
    graph_ops = loaders["translator"].ops()["graph_ops"]
    assert any(re.match(r"function (\w+_)?while(_\d+)?_body_\d+$", where) for where in graph_ops["ReadVariableOp"])


def test_python_ops_are_refused(tmp_path):
    module = tf.Module()
    module.serve = tf.function(lambda text: {"length": tf.numpy_function(lambda t: np.float32(len(t)), [text],
                                                                        tf.float32)},
                               input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    tf.saved_model.save(module, str(tmp_path / "1"), signatures={"serving_default": module.serve})
    with ContractLoader(tmp_path / "1") as loader:
        problems = loader.audit().problems
    assert any(problem.startswith("PyFunc") and "runs Python" in problem for problem in problems)


def test_keras_variables_saved_through_their_wrappers_do_not_load_in_tf_serving(tmp_path, exports):
    """Why kzoo.export.serving_root exists: Python's loader accepts this export; TF Serving's does not."""
    classifier = exports["classifier"][1]
    module = tf.Module()
    module.model = classifier
    module.serve = tf.function(lambda x: {"logits": classifier({"token_ids": x, "segment_ids": x * 0,
                                                                  "padding_mask": tf.ones_like(x)})},
                               input_signature=[tf.TensorSpec([None, 4], tf.int32, name="x")])
    tf.saved_model.save(module, str(tmp_path / "1"), signatures={"serving_default": module.serve})
    assert tf.saved_model.load(str(tmp_path / "1")).signatures["serving_default"](x=tf.ones([1, 4], tf.int32))
    with ContractLoader(tmp_path / "1") as loader, pytest.raises(ServingError, match="Could not find variable"):
        loader.rest({"inputs": {"x": [[1, 2, 3, 4]]}})


def test_mixed_precision_exports_give_float32(tmp_path, preprocessor):
    from kzoo.export import export_classifier, export_embedder
    from kzoo.models import BertClassifier
    from tests.serving.tiny_exports import tiny_bert

    classifier = BertClassifier(tiny_bert(5, dtype="mixed_bfloat16"), num_classes=2)
    path = export_classifier(classifier, preprocessor, ["a", "b"], tmp_path / "classifier")
    embedder = export_embedder(tiny_bert(6, dtype="mixed_bfloat16"), preprocessor, tmp_path / "embedder")
    for export_dir, output in ((path, "probabilities"), (embedder, "embedding")):
        with ContractLoader(export_dir) as loader:
            assert loader.signatures["serving_default"]["outputs"][output]["dtype"] == "float32"
            assert check_contract(export_dir) == []


def test_shipped_models_meet_the_contract():
    shipped = version_dirs(SAVED_MODELS)  # and any model exported there locally
    assert "transformer_multi30k_en_de" in [path.parent.name for path in shipped]
    for export_dir in shipped:
        # Without replaying the warm-up requests (16 XLA compiles for the translator, about a minute):
        # tests/export/test_compiled_translator_export.py replays a tiny export's, and test_shipped_model.py checks
        # that the shipped ones are the requests of every compiled shape.
        assert check_contract(export_dir, warmup=False) == [], export_dir
    configured = re.findall(r'name: "([^"]+)"', (SAVED_MODELS / "models.config").read_text())
    assert "transformer_multi30k_en_de" in configured and set(configured) <= set(served_models(SAVED_MODELS))


def test_the_loader_script_refuses_a_flag_it_does_not_take_before_loading(capsys):
    from kzoo.serving import c_api_loader

    assert c_api_loader.main(["no/such/model", "--tensorflow_intra_op_parallelism=two"]) == 2
    error = capsys.readouterr().err
    assert "'--tensorflow_intra_op_parallelism=two' is not a flag it takes" in error and "--no-warmup" in error
    assert c_api_loader.main(["no/such/model", "--warmup"]) == 2  # not --no-warmup
    assert c_api_loader.main([]) == 2 and c_api_loader.main(["--no-warmup"]) == 2  # no model: the usage
    assert "python kzoo/serving/c_api_loader.py" in capsys.readouterr().err


def test_the_loader_process_gets_the_environment_it_is_given(tmp_path):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        return {"length": tf.strings.length(text)}

    tf.saved_model.save(tf.Module(), str(tmp_path / "1"), signatures={"serving_default": serve})
    logs = {}
    for setting in ("1", "0"):
        with ContractLoader(tmp_path / "1", environment={"TF_ENABLE_ONEDNN_OPTS": setting}) as loader:
            assert loader.rest({"instances": ["abc"]}) == {"predictions": [3]}
            loader._log.seek(0)
            logs[setting] = loader._log.read()
    # TensorFlow announces its oneDNN graph rewrites at start-up unless TF_ENABLE_ONEDNN_OPTS=0 turned them off
    assert "oneDNN custom operations are on" in logs["1"] and "oneDNN custom operations" not in logs["0"]


def test_an_environment_value_that_is_not_a_string_is_refused_before_loading():
    with pytest.raises(TypeError, match=r"environment\['TF_ENABLE_ONEDNN_OPTS'\]=0: .* \(pass '0'\)"):
        ContractLoader("saved_models/none", environment={"TF_ENABLE_ONEDNN_OPTS": 0})
