"""TF Serving Predict requests from Python strings, and responses back to Python values: REST and gRPC.

REST (port 8501): POST the body to `rest_url(...)`; gRPC (port 8500): send `grpc_request(...)` with
`PredictionServiceStub.Predict` from the optional `tensorflow-serving-api` package (`pip install
tensorflow-serving-api`), which these gRPC helpers import when called.

Example:
```python
body = rest_request({"text": ["A great film.", "Dull."]})   # {"instances": [{"text": "A great film."}, ...]}
requests.post(rest_url("localhost", "minilm_sst2"), json=body).json()
read_rest_response(response)   # {"label": ["positive", "negative"], "probabilities": [[0.02, 0.98], ...]}
```
"""

import base64

ROW, COLUMNAR = "instances", "inputs"


def rest_url(host, model_name, version=None, port=8501):
    """The REST Predict URL of a model (its newest version unless `version` is given)."""
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
    list with one value per example; bytes values are sent as `{"b64": ...}`."""
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
    """A REST Predict response body to {output name: list with one value per example}.

    A model with a single output answers without its name; it is then `output_name` (None if not given). An
    `{"error": ...}` body raises `RuntimeError` with TF Serving's message."""
    if "error" in body:
        raise RuntimeError(f"TF Serving answered with an error: {body['error']}")
    if "predictions" in body:
        rows = body["predictions"]
        if rows and all(isinstance(row, dict) and "b64" not in row for row in rows):
            return {name: [row[name] for row in rows] for name in rows[0]}
        return {output_name: rows}
    if "outputs" in body:
        outputs = body["outputs"]
        if isinstance(outputs, dict) and "b64" not in outputs:
            return dict(outputs)
        return {output_name: outputs}
    raise ValueError(f"{sorted(body)} is not a Predict response: it has neither \"predictions\" nor \"outputs\".")


def _serving_apis():
    try:
        from tensorflow_serving.apis import predict_pb2
    except ImportError as error:
        raise ImportError("gRPC requests need the tensorflow-serving-api package: pip install "
                          "tensorflow-serving-api (kzoo installs it with `pip install kzoo[serving]`).") from error
    return predict_pb2


def grpc_request(model_name, inputs, signature_name="serving_default", version=None):
    """A `tensorflow.serving.PredictRequest` for `inputs` ({input name: list of values, one per example})."""
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
    """A `PredictResponse` (message or serialized bytes) to {output name: numpy array}; string outputs as str."""
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
