"""TF Serving Predict requests from Python strings, and responses back to Python values: REST and gRPC.

REST (port 8501): POST the body to `rest_url(...)`; gRPC (port 8500): send `grpc_request(...)` with
`PredictionServiceStub.Predict` from the optional `tensorflow-serving-api` package (`pip install
tensorflow-serving-api`), which these gRPC helpers import when called.

Against a running server (with the `requests` package):
```python
body = rest_request({"text": ["A great film.", "Dull."]})   # {"instances": [{"text": "A great film."}, ...]}
response = requests.post(rest_url("localhost", "minilm_sst2"), json=body)
read_rest_response(response.text)   # {"label": ["positive", "negative"], "probabilities": [[0.02, 0.98], ...]}
```
"""

import base64
import json

ROW, COLUMNAR = "instances", "inputs"


def rest_url(host, model_name, version=None, port=8501):
    """The REST Predict URL of a model (its newest version unless `version` is given).

    Example:
    ```python
    from kzoo.serving import rest_url

    assert rest_url("localhost", "minilm_sst2") == "http://localhost:8501/v1/models/minilm_sst2:predict"
    assert rest_url("server", "m", version=3, port=80) == "http://server:80/v1/models/m/versions/3:predict"
    ```
    """
    version_path = f"/versions/{int(version)}" if version is not None else ""
    return f"http://{host}:{port}/v1/models/{model_name}{version_path}:predict"


def _batch(inputs):
    if not inputs:
        raise ValueError("inputs is empty: pass {input name: list of values}, e.g. {\"text\": [\"...\"]}.")
    columns = {name: list(values) for name, values in inputs.items()}
    sizes = {name: len(values) for name, values in columns.items()}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"inputs have different batch sizes {sizes}: give one value per example for every input.")
    return columns, next(iter(sizes.values()))


def rest_request(inputs, form=ROW, signature_name=None):
    """A REST Predict body: `{"instances": [{name: value, ...}, ...]}` (row form, the default) or
    `{"inputs": {name: [values]}}` (columnar form, `form="inputs"`). `inputs` maps each signature input name to a
    list with one value per example; bytes values are sent as `{"b64": ...}`.

    Example:
    ```python
    from kzoo.serving import rest_request

    assert rest_request({"text": ["A great film.", b"\\xff"]}) == {
        "instances": [{"text": "A great film."}, {"text": {"b64": "/w=="}}]}
    assert rest_request({"text": ["a", "b"]}, form="inputs") == {"inputs": {"text": ["a", "b"]}}
    ```
    """
    if form not in (ROW, COLUMNAR):
        raise ValueError(f"form={form!r}; use {ROW!r} (row) or {COLUMNAR!r} (columnar).")
    columns, size = _batch(inputs)
    columns = {name: [_json(value) for value in values] for name, values in columns.items()}
    if form == ROW:
        body = {ROW: [{name: values[i] for name, values in columns.items()} for i in range(size)]}
    else:
        body = {COLUMNAR: columns}
    if signature_name:
        body["signature_name"] = signature_name
    return body


def _json(value):
    return {"b64": base64.b64encode(value).decode("ascii")} if isinstance(value, bytes) else value


def read_rest_response(body, output_name=None):
    """A REST Predict response body (a dict, or the JSON text or bytes as received) to {output name: list with one
    value per example}.

    A model with a single output answers without the output's name: pass it as `output_name` (the signature's
    output, such as "translation" or "embedding"); without it, such a response raises `ValueError`. An
    `{"error": ...}` body raises `RuntimeError` with TF Serving's message.

    Example:
    ```python
    from kzoo.serving import read_rest_response

    body = '{"predictions": [{"label": "positive", "probabilities": [0.1, 0.9]}]}'  # response.text
    assert read_rest_response(body) == {"label": ["positive"], "probabilities": [[0.1, 0.9]]}
    assert read_rest_response({"predictions": ["Hallo"]}, output_name="translation") == {"translation": ["Hallo"]}
    assert read_rest_response(b'{"outputs": {"label": ["negative"]}}') == {"label": ["negative"]}
    ```
    """
    if isinstance(body, (str, bytes, bytearray)):
        try:
            body = json.loads(body)
        except ValueError as error:
            raise ValueError(f"the response body is not JSON ({error}): pass the body TF Serving sent.") from None
    if not isinstance(body, dict):
        raise ValueError(f"the response body is a JSON {type(body).__name__}, not the object TF Serving sends.")
    if "error" in body:
        raise RuntimeError(f"TF Serving answered with an error: {body['error']}")
    if "predictions" in body:
        rows = body["predictions"]
        if rows and all(isinstance(row, dict) and "b64" not in row for row in rows):
            return {name: [row[name] for row in rows] for name in rows[0]}
        return _single_output(rows, output_name)
    if "outputs" in body:
        outputs = body["outputs"]
        if isinstance(outputs, dict) and "b64" not in outputs:
            return dict(outputs)
        return _single_output(outputs, output_name)
    raise ValueError(f"{sorted(body)} is not a Predict response: it has neither \"predictions\" nor \"outputs\".")


def _single_output(values, output_name):
    """The values of a single-output model's response, which TF Serving sends without the output's name."""
    if output_name is None:
        if not values:
            return {}  # an empty batch: nothing to name
        raise ValueError("this response has one unnamed output (TF Serving leaves the name out for a model with a "
                         "single output): pass output_name=, the signature's output (\"translation\" for a "
                         "translator, \"embedding\" for an embedder).")
    return {output_name: values}


def _serving_apis():
    try:
        from tensorflow_serving.apis import predict_pb2
    except ImportError as error:
        raise ImportError("gRPC requests need the tensorflow-serving-api package: pip install "
                          "tensorflow-serving-api (kzoo installs it with `pip install kzoo[serving]`).") from error
    return predict_pb2


def grpc_request(model_name, inputs, signature_name="serving_default", version=None):
    """A `tensorflow.serving.PredictRequest` for `inputs` ({input name: list of values, one per example}).

    Example:
    ```python
    from kzoo.serving import grpc_request

    request = grpc_request("minilm_sst2", {"text": ["A great film."]}, version=2)
    assert (request.model_spec.name, request.model_spec.version.value) == ("minilm_sst2", 2)
    assert tf.make_ndarray(request.inputs["text"]).tolist() == [b"A great film."]
    ```
    """
    import tensorflow as tf

    predict_pb2 = _serving_apis()
    columns, _ = _batch(inputs)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    if version is not None:
        request.model_spec.version.value = int(version)
    for name, values in columns.items():
        values = [value.encode("utf-8") if isinstance(value, str) else value for value in values]
        is_text = not values or isinstance(values[0], bytes)  # an empty batch is an empty batch of strings
        request.inputs[name].CopyFrom(tf.make_tensor_proto(values, dtype=tf.string if is_text else None))
    return request


def read_grpc_response(response):
    """A `PredictResponse` (message or serialized bytes) to {output name: numpy array}; string outputs as str.

    Example:
    ```python
    from tensorflow_serving.apis import predict_pb2
    from kzoo.serving import read_grpc_response

    response = predict_pb2.PredictResponse()
    response.outputs["label"].CopyFrom(tf.make_tensor_proto([b"positive"]))
    assert read_grpc_response(response.SerializeToString())["label"].tolist() == ["positive"]
    ```
    """
    import numpy as np
    import tensorflow as tf

    predict_pb2 = _serving_apis()
    if isinstance(response, bytes):
        response = predict_pb2.PredictResponse.FromString(response)
    outputs = {}
    for name, proto in response.outputs.items():
        array = tf.make_ndarray(proto)
        if array.dtype == object:
            array = np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array) if array.size else array
        outputs[name] = array
    return outputs
