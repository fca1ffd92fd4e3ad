"""TF Serving's request and response formats, and the protocol-buffer reading behind the contract loader, checked
against TensorFlow's and tensorflow-serving-api's own message classes."""

import json
import re

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

from kzoo.serving import (
    audit_ops,
    grpc_request,
    model_config,
    read_grpc_response,
    read_rest_response,
    rest_json,
    rest_request,
    rest_url,
    served_models,
    wire_format,
)

SIGNATURES = {
    "serving_default": {"inputs": {"text": {"dtype": "string"}, "text_pair": {"dtype": "string"}}},
    "single": {"inputs": {"text": {"dtype": "string"}}},
}


def test_rest_request_forms():
    assert rest_request({"text": ["a", "b"]}) == {"instances": [{"text": "a"}, {"text": "b"}]}
    assert rest_request({"text": ["a"], "text_pair": ["b"]}, form="inputs", signature_name="pairs") == {
        "inputs": {"text": ["a"], "text_pair": ["b"]}, "signature_name": "pairs"}
    assert rest_request({"text": [b"\xff"]}) == {"instances": [{"text": {"b64": "/w=="}}]}
    with pytest.raises(ValueError, match="different batch sizes"):
        rest_request({"text": ["a"], "text_pair": []})
    assert rest_url("localhost", "minilm_sst2") == "http://localhost:8501/v1/models/minilm_sst2:predict"
    assert rest_url("h", "m", version=3, port=80) == "http://h:80/v1/models/m/versions/3:predict"


def test_rest_bodies_become_tensors_as_tf_serving_reads_them():
    name, tensors, row = rest_json.request_tensors(
        {"instances": [{"text": "a", "text_pair": {"b64": "/w=="}}, {"text": "c", "text_pair": "d"}]}, SIGNATURES)
    assert (name, row) == ("serving_default", True)
    assert tensors == {"text": ("string", [2], [b"a", b"c"]), "text_pair": ("string", [2], [b"\xff", b"d"])}
    _, tensors, row = rest_json.request_tensors({"signature_name": "single", "inputs": ["x", "y", "z"]}, SIGNATURES)
    assert tensors == {"text": ("string", [3], [b"x", b"y", b"z"])} and not row
    _, tensors, _ = rest_json.request_tensors({"signature_name": "single", "instances": []}, SIGNATURES)
    assert tensors == {"text": ("string", [0], [])}
    for body, message in [
        ({"instances": [{"text": "a"}]}, "inputs \\['text', 'text_pair'\\]"),
        ({"instances": ["a"], "inputs": ["a"]}, "exactly one of"),
        ({"signature_name": "nope", "inputs": []}, "\"nope\" not found"),
        ({"signature_name": "single", "inputs": [["a"], ["b", "c"]]}, "different lengths"),
        ({"signature_name": "single", "inputs": [1]}, "is not a string"),
    ]:
        with pytest.raises(rest_json.RequestError, match=message):
            rest_json.request_tensors(body, SIGNATURES)


def test_outputs_become_the_response_body_of_each_form():
    outputs = {"probabilities": ("float32", [2, 2], [0.25, 0.75, 1.0, 0.0]),
               "label": ("string", [2], [b"positive", b"\xff"])}
    rows = rest_json.response_body(outputs, row_form=True)
    assert rows == {"predictions": [{"probabilities": [0.25, 0.75], "label": "positive"},
                                    {"probabilities": [1.0, 0.0], "label": {"b64": "/w=="}}]}
    assert read_rest_response(rows)["probabilities"] == [[0.25, 0.75], [1.0, 0.0]]
    columns = rest_json.response_body(outputs, row_form=False)
    assert columns == {"outputs": {"probabilities": [[0.25, 0.75], [1.0, 0.0]], "label": ["positive", {"b64": "/w=="}]}}
    single = rest_json.response_body({"translation": ("string", [1], [b"Hallo"])}, row_form=True)
    assert single == {"predictions": ["Hallo"]}
    assert read_rest_response(single, output_name="translation") == {"translation": ["Hallo"]}
    assert rest_json.response_body({"translation": ("string", [0], [])}, row_form=False) == {"outputs": []}
    with pytest.raises(RuntimeError, match="bad input"):
        read_rest_response({"error": "bad input"})


@pytest.mark.parametrize("array", [
    np.array([[0.5, -1.25], [3.0, 0.0]], np.float32),
    np.array([b"a", "ü".encode(), b""], object),
    np.array([[1, -2, 2**31 - 1]], np.int32),
    np.array([5, -(2**40)], np.int64),
    np.array([True, False]),
    np.zeros([0, 3], np.float32),
])
def test_tensor_protos_read_and_write_like_tensorflows(array):
    dtype, shape, values = wire_format.decode_tensor(tf.make_tensor_proto(array).SerializeToString())
    assert shape == list(array.shape) and values == array.reshape(-1).tolist()
    proto = tf.make_tensor_proto(np.full([2, 2], 7, np.int32))  # one value standing for all
    proto.ClearField("tensor_content")
    proto.int_val[:] = [7]
    assert wire_format.decode_tensor(proto.SerializeToString())[2] == [7, 7, 7, 7]
    written = tf.make_ndarray(tf.make_tensor_proto(0).FromString(wire_format.encode_tensor(dtype, shape, values)))
    assert written.shape == array.shape and written.reshape(-1).tolist() == array.reshape(-1).tolist()


def test_grpc_requests_and_responses():
    request = grpc_request("minilm_sst2", {"text": ["a", "ü"], "text_pair": ["b", ""]}, version=2)
    assert isinstance(request, predict_pb2.PredictRequest)
    assert (request.model_spec.name, request.model_spec.version.value) == ("minilm_sst2", 2)
    fields = wire_format.map_entries(request.SerializeToString(), 2)
    assert wire_format.decode_tensor(fields["text"]) == ("string", [2], [b"a", "ü".encode()])
    response = predict_pb2.PredictResponse()
    response.outputs["label"].CopyFrom(tf.make_tensor_proto([b"positive"]))
    response.outputs["probabilities"].CopyFrom(tf.make_tensor_proto(np.array([[0.1, 0.9]], np.float32)))
    read = read_grpc_response(response.SerializeToString())
    assert read["label"].tolist() == ["positive"] and read["probabilities"].dtype == np.float32


def test_signatures_and_ops_are_read_from_a_saved_model(tmp_path):
    module = tf.Module()
    module.serve = tf.function(
        lambda text: {"size": tf.while_loop(lambda i: i < tf.size(text), lambda i: i + 1, [0])[0]},
        input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.serve})
    [(tags, meta_graph)] = wire_format.meta_graphs((tmp_path / "saved_model.pb").read_bytes())
    assert tags == {"serve"}
    signature = wire_format.signatures(meta_graph)["serving_default"]
    assert signature["inputs"]["text"]["dtype"] == "string" and signature["inputs"]["text"]["shape"] == [-1]
    assert signature["outputs"]["size"]["dtype"] == "int32" and signature["outputs"]["size"]["shape"] == []
    ops = wire_format.graph_ops(meta_graph)
    assert {"StatefulPartitionedCall", "Placeholder", "Less", "AddV2"} <= set(ops)
    assert any(where.startswith("function while_body") for where in ops["AddV2"])


def test_op_audit_rules():
    core, text = {"MatMul", "PyFunc"}, {"TFText>RoundRobinTrim", "SentencepieceOp"}
    audit = audit_ops({"MatMul": ["graph"], "SentencepieceOp": ["graph"]}, core, text, "2.19.1")
    assert audit.ok and audit.minimum_tf_serving == "2.19.1"
    audit = audit_ops({"TFText>RoundRobinTrim": ["function f"]}, core, text, "2.19.1")
    assert not audit.ok and audit.minimum_tf_serving == "2.20.0"
    audit = audit_ops({"PyFunc": ["function f"], "MyCustomOp": ["graph"]}, core, text)
    assert len(audit.problems) == 2 and "runs Python" in audit.problems[1] and "MyCustomOp" in audit.problems[0]
    with pytest.raises(ValueError, match="2.19.1"):
        audit_ops({}, core, text, "2.3.0")


def test_model_config_serves_every_model_folder(tmp_path):
    (tmp_path / "translator" / "2").mkdir(parents=True)
    (tmp_path / "translator" / "2" / "saved_model.pb").write_bytes(b"")
    (tmp_path / "half" / ".3.partial-x").mkdir(parents=True)
    assert served_models(tmp_path) == ["translator"]
    assert model_config(["translator"]) == (
        'model_config_list {\n  config {\n    name: "translator"\n    base_path: "/models/translator"\n'
        '    model_platform: "tensorflow"\n  }\n}\n')
    with pytest.raises(ValueError, match="no models"):
        model_config([])


def test_a_response_body_is_read_from_its_json_text_and_a_single_output_is_named():
    text = json.dumps({"predictions": [{"label": "positive", "probabilities": [0.1, 0.9]}]})
    assert read_rest_response(text) == {"label": ["positive"], "probabilities": [[0.1, 0.9]]}
    assert read_rest_response(text.encode()) == read_rest_response(text)
    assert read_rest_response('{"outputs": ["Hallo"]}', output_name="translation") == {"translation": ["Hallo"]}
    with pytest.raises(ValueError, match="one unnamed output .* pass output_name="):
        read_rest_response({"predictions": ["Hallo"]})
    assert read_rest_response({"outputs": []}) == {}
    with pytest.raises(ValueError, match="not JSON"):
        read_rest_response("<html>502 Bad Gateway</html>")
    with pytest.raises(ValueError, match="a JSON list, not the object"):
        read_rest_response("[1, 2]")
    with pytest.raises(RuntimeError, match="bad input"):
        read_rest_response('{"error": "bad input"}')


def test_the_op_audit_documents_the_names_it_defines():
    import kzoo.serving.op_audit as op_audit

    documented = set(re.findall(r"`([A-Z][A-Z_]+)`", op_audit.__doc__))
    assert documented and documented <= set(vars(op_audit)), documented - set(vars(op_audit))
