"""TF Serving's REST Predict JSON, both ways: a request body to named input tensors, output tensors to a response.

The rules are those of TF Serving's `json_tensor.cc` (documented at tensorflow.org/tfx/serving/api_rest):
- Row form `{"instances": [...]}`: one entry per example. With one signature input an entry is that input's value
  (or an object naming it); with several, an object with every input. The entries are stacked into tensors whose
  first dimension is the number of entries. The response is `{"predictions": [...]}`, one entry per example: the
  value of the one output, or an object of every output.
- Columnar form `{"inputs": ...}`: the value of the one input, or an object of every input, each a whole tensor.
  The response is `{"outputs": ...}`: the one output's value, or an object of every output.
- Strings are JSON strings; binary ones are `{"b64": "..."}`. Output strings that are not UTF-8 come back as
  `{"b64": ...}` too. `"signature_name"` picks the signature (default `serving_default`).

Tensors here are (dtype name, shape, flat row-major values). Standard library only: the loader imports it by file.
"""

import base64
import binascii
import json

DEFAULT_SIGNATURE = "serving_default"


class RequestError(ValueError):
    """A request TF Serving would answer with HTTP 400: the message is the `error` of its response body.

    Example:
    ```python
    from kzoo.serving.rest_json import RequestError, request_tensors

    signatures = {"serving_default": {"inputs": {"text": {"dtype": "string"}}}}
    try:
        request_tensors({"instances": [{"b64": 5}]}, signatures)
    except RequestError as error:
        assert str(error) == 'instances.text: JSON Value: {"b64":5} not formatted correctly for base64 data'
    ```
    """


def _flatten(value, dtype, where):
    """Nested lists to (shape, flat values), checking that the nesting is rectangular."""
    if isinstance(value, list):
        if not value:
            return [0], []
        parts = [_flatten(item, dtype, where) for item in value]
        shapes = {tuple(shape) for shape, _ in parts}
        if len(shapes) != 1:
            raise RequestError(f"{where}: lists of different lengths ({sorted(shapes)}) do not make a tensor.")
        return [len(value), *parts[0][0]], [v for _, flat in parts for v in flat]
    return [], [_scalar(value, dtype, where)]


def _json_text(value):
    """A JSON value as TF Serving's messages quote it (compact)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _base64(value, where):
    """`{"b64": "..."}` to its bytes, refused as TF Serving refuses it (json_tensor.cc) when it is not one."""
    if not (isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str)):
        raise RequestError(f"{where}: JSON Value: {_json_text(value)} not formatted correctly for base64 data")
    text = value["b64"]
    try:  # absl::Base64Unescape, as TF Serving: padding optional
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise RequestError(f"{where}: Unable to base64 decode") from None


def _scalar(value, dtype, where):
    if dtype == "string":
        if isinstance(value, dict):
            return _base64(value, where)
        if not isinstance(value, str):
            raise RequestError(f"{where}: {value!r} is not a string; the signature input is a string tensor.")
        return value.encode("utf-8")
    if dtype == "float32":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RequestError(f"{where}: {value!r} is not a number.")
        return float(value)
    if dtype == "bool":
        if not isinstance(value, bool):
            raise RequestError(f"{where}: {value!r} is not true or false.")
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{where}: {value!r} is not an integer.")
    return value


def _named(value, inputs):
    """A value given for a signature's only input without its name, as {name: value}; anything else as it is."""
    if len(inputs) == 1 and not (isinstance(value, dict) and set(value) == set(inputs)):
        return {next(iter(inputs)): value}
    return value


def request_tensors(body, signatures):
    """A decoded JSON request body to (signature name, {input name: tensor}, row form?).

    Example:
    ```python
    from kzoo.serving.rest_json import request_tensors

    signatures = {"serving_default": {"inputs": {"text": {"dtype": "string"}}}}
    name, tensors, row_form = request_tensors({"instances": ["a dog", {"b64": "/w=="}]}, signatures)
    assert (name, row_form) == ("serving_default", True)
    assert tensors == {"text": ("string", [2], [b"a dog", b"\\xff"])}
    ```
    """
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object with \"instances\" or \"inputs\".")
    name = body.get("signature_name", DEFAULT_SIGNATURE)
    if name not in signatures:
        raise RequestError(f"Serving signature name: \"{name}\" not found in signature def")
    inputs = signatures[name]["inputs"]
    if ("instances" in body) == ("inputs" in body):
        raise RequestError("the request body must have exactly one of \"instances\" (row form) and \"inputs\" "
                           "(columnar form).")
    if "instances" in body:
        instances = body["instances"]
        if not isinstance(instances, list):
            raise RequestError("\"instances\" must be a list, one entry per example.")
        columns = {key: [] for key in inputs}
        for i, instance in enumerate(instances):
            instance = _named(instance, inputs)
            if not isinstance(instance, dict) or set(instance) != set(inputs):
                raise RequestError(f"instances[{i}] must be an object with the signature's inputs {sorted(inputs)}.")
            for key in inputs:
                columns[key].append(instance[key])
    else:
        columns = _named(body["inputs"], inputs)
        if not isinstance(columns, dict) or set(columns) != set(inputs):
            raise RequestError(f"\"inputs\" must be an object with the signature's inputs {sorted(inputs)}.")
    row_form = "instances" in body
    tensors = {}
    for key, info in inputs.items():
        shape, flat = _flatten(columns[key], info["dtype"], f"{'instances' if row_form else 'inputs'}.{key}")
        tensors[key] = (info["dtype"], shape, flat)
    return name, tensors, row_form


def _json_value(value):
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    return value


def _nest(shape, flat):
    """Flat values to nested lists of `shape`."""
    if not shape:
        return _json_value(flat[0])
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nest(shape[1:], flat[i * step : (i + 1) * step]) for i in range(shape[0])]


def response_body(outputs, row_form):
    """{output name: tensor} to the JSON response body TF Serving would send for that request form.

    Example:
    ```python
    from kzoo.serving.rest_json import response_body

    outputs = {"label": ("string", [2], [b"positive", b"negative"])}
    assert response_body(outputs, row_form=True) == {"predictions": ["positive", "negative"]}
    assert response_body(outputs, row_form=False) == {"outputs": ["positive", "negative"]}
    ```
    """
    if not row_form:
        nested = {key: _nest(shape, flat) for key, (_, shape, flat) in outputs.items()}
        return {"outputs": next(iter(nested.values())) if len(nested) == 1 else nested}
    batch_sizes = {shape[0] if shape else None for _, shape, _ in outputs.values()}
    if len(batch_sizes) != 1 or None in batch_sizes:
        raise RequestError(f"outputs have batch sizes {sorted(map(str, batch_sizes))}: the row form needs every output "
                           "to have the same first dimension; use the columnar form (\"inputs\").")
    rows = [{} for _ in range(batch_sizes.pop())]
    for key, (_, shape, flat) in outputs.items():
        for i, value in enumerate(_nest(shape, flat)):
            rows[i][key] = value
    if len(outputs) == 1:
        rows = [next(iter(row.values())) for row in rows]
    return {"predictions": rows}
