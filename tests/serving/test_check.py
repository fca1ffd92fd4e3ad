"""`python -m kzoo.serving.check` over models that do not load (issue 19, item 6): every model is checked, one line
each with TensorFlow's real cause, a summary, and a non-zero exit; hostile requests get TF Serving's error and the
loader process goes on."""

import shutil

import keras
import pytest
import tensorflow as tf

from kzoo.export.saved_model_writer import write_saved_model
from kzoo.serving import ContractLoader, ServingError
from kzoo.serving.check import main
from kzoo.serving.wire_format import decode_tensor, encode_field, encode_tensor, field_value, fields


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    """saved_models/ with a good model, one whose variables were cut short, one with a flipped byte, one whose
    newest version has no saved_model.pb, and a good one after them."""
    root = tmp_path_factory.mktemp("check") / "saved_models"
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(2)])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        return {"score": model(tf.cast(tf.strings.length(text), tf.float32)[:, None])}

    good = write_saved_model(root / "a_good", None, serve, [model])
    for name in ("b_truncated", "c_flipped", "e_good"):
        shutil.copytree(good, root / name / "1")
    (root / "d_unfinished" / "1").mkdir(parents=True)
    data = root / "b_truncated/1/variables/variables.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:-8])
    data = root / "c_flipped/1/variables/variables.data-00000-of-00001"
    flipped = bytearray(data.read_bytes())
    flipped[0] ^= 0xFF
    data.write_bytes(bytes(flipped))
    return root


def test_every_model_is_checked_with_its_real_cause_and_a_summary(saved_models, capsys):
    assert main([str(saved_models)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6
    by_model = {line.split(": ", 1)[0].split("/")[-2]: line.split(": ", 1)[1] for line in lines[:5]}
    assert by_model["a_good"] == by_model["e_good"] == "meets TF Serving's contract"
    assert by_model["b_truncated"].startswith("FAILS: ") and "Read less bytes than requested" in by_model["b_truncated"]
    assert "Checksum does not match" in by_model["c_flipped"]
    assert "has no saved_model.pb" in by_model["d_unfinished"]
    assert not any("Traceback" in line or "function_node" in line or "cuInit" in line for line in lines)
    assert lines[-1] == "5 checked: 2 meet TF Serving's contract, 3 fail."


def test_a_model_that_does_not_load_raises_its_cause(saved_models):
    with pytest.raises(ServingError, match=r"does not load as TF Serving loads it: TensorBundle .*: Checksum does not"):
        ContractLoader(saved_models / "c_flipped" / "1")


@pytest.fixture(scope="module")
def served(saved_models):
    with ContractLoader(saved_models / "a_good" / "1") as loader:
        yield loader


def predict_request(tensor_proto):
    entry = encode_field(1, b"text") + encode_field(2, tensor_proto)
    return encode_field(1, encode_field(3, b"serving_default")) + encode_field(2, entry)


@pytest.mark.parametrize("body, error", [
    ({"instances": [{"b64": 5}]}, r'JSON Value: \{"b64":5\} not formatted correctly for base64 data'),
    ({"instances": [{"b64": "!!not base64!!"}]}, "Unable to base64 decode"),
    ({"inputs": {"text": [{"b64": ["x"]}]}}, "not formatted correctly for base64 data"),
])
def test_a_hostile_rest_body_gets_tf_servings_error_and_the_loader_goes_on(served, body, error):
    with pytest.raises(ServingError, match=error):
        served.rest(body)
    assert len(served.rest({"instances": ["still", "serving"]})["predictions"]) == 2


def test_a_truncated_grpc_body_gets_an_error_and_the_loader_goes_on(served):
    whole = predict_request(encode_tensor("string", [2], [b"a dog", b"runs"]))
    with pytest.raises(ServingError, match="truncated varint at byte 1 of 2"):
        served.grpc(whole[:1] + b"\xff")  # a length whose varint never ends
    with pytest.raises(ServingError, match="cut short"):
        served.grpc(whole[:-3])
    with pytest.raises(ServingError, match="asks for 1099511627776 copies of one value"):
        served.grpc(predict_request(encode_tensor("string", [1 << 40], [b"x"])))
    outputs = dict(fields(served.grpc(whole)))  # the same process still answers, whole
    assert decode_tensor(field_value(outputs[1], 2))[1] == [2, 2]
