"""The protocol-buffer wire format, by hand: just enough to read a SavedModel's signatures and ops and to read and
write the tensors of TF Serving's Predict messages, with the standard library only.

TF Serving's contract is checked in a process that runs no TensorFlow Python (see `c_api_loader.py`), and
TensorFlow's generated message classes live inside the `tensorflow` package, whose import loads all of it. The
messages involved are small and stable, so kzoo reads their fields by number, as `protoc --decode_raw` would:
field numbers are quoted from tensorflow/core/protobuf/meta_graph.proto, graph.proto, function.proto,
op_def.proto, tensor.proto and tensor_shape.proto, and tensorflow_serving/apis/predict.proto.

This module imports nothing of kzoo, TensorFlow or numpy: the loader script imports it by file.
"""

import struct

# tensorflow/core/framework/types.proto: the DataType numbers kzoo's signatures use.
DT_FLOAT, DT_INT32, DT_STRING, DT_INT64, DT_BOOL = 1, 3, 7, 9, 10
DTYPE_NAMES = {DT_FLOAT: "float32", DT_INT32: "int32", DT_STRING: "string", DT_INT64: "int64", DT_BOOL: "bool"}
DTYPE_NUMBERS = {name: number for number, name in DTYPE_NAMES.items()}
MAX_FILLED_VALUES = 1 << 24  # a one-value TensorProto may stand for a whole tensor: bound what it expands to


class WireFormatError(ValueError):
    """Bytes that are not a well-formed protocol-buffer message (truncated, or not the message they were read as);
    TF Serving refuses such a request before running anything.

    Example:
    ```python
    from kzoo.serving.wire_format import WireFormatError, fields

    try:
        list(fields(b"\\x0a\\xff"))  # field 1, a length whose varint never ends
    except WireFormatError as error:
        assert "truncated varint at byte 1 of 2" in str(error)
    ```
    """


def _varint(data, position):
    result = shift = 0
    start = position
    while True:
        if position >= len(data):
            raise WireFormatError(f"truncated varint at byte {start} of {len(data)}: the message is cut short.")
        if shift >= 64:
            raise WireFormatError(f"varint at byte {start} is longer than 10 bytes: the data is not a message.")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def _take(data, position, length, number):
    """`length` bytes of field `number` from `position`, refusing to read past the end of the message."""
    if position + length > len(data):
        raise WireFormatError(f"field {number} needs {length} bytes at byte {position}, but the message ends at byte "
                              f"{len(data)}: it is cut short.")
    return bytes(data[position : position + length]), position + length


def fields(data):
    """Yield (field number, value) for each field of a serialized message, in order. Varints come as int, 64- and
    32-bit fields as raw bytes, length-delimited fields (strings, messages, packed lists) as bytes.

    Example:
    ```python
    from kzoo.serving.wire_format import encode_field, fields

    message = encode_field(1, b"serve") + encode_field(2, 7)
    assert list(fields(message)) == [(1, b"serve"), (2, 7)]
    ```
    """
    data = memoryview(data)
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, position = _varint(data, position)
        elif wire_type == 1:
            value, position = _take(data, position, 8, number)
        elif wire_type == 2:
            length, position = _varint(data, position)
            value, position = _take(data, position, length, number)
        elif wire_type == 5:
            value, position = _take(data, position, 4, number)
        else:
            raise WireFormatError(f"wire type {wire_type} of field {number} is not a protocol-buffer wire type this "
                             "reader knows (groups are not used by TensorFlow's messages); the data is not the "
                             "message it was read as.")
        yield number, value


def field_list(data, number):
    """Every value of one field, in order.

    Example:
    ```python
    from kzoo.serving.wire_format import encode_field, field_list

    assert field_list(encode_field(4, b"a") + encode_field(1, 3) + encode_field(4, b"b"), 4) == [b"a", b"b"]
    ```
    """
    return [value for n, value in fields(data) if n == number]


def field_value(data, number, default=None):
    """The last value of one field (protocol buffers' rule for a repeated non-repeated field), or `default`.

    Example:
    ```python
    from kzoo.serving.wire_format import encode_field, field_value

    message = encode_field(1, 3) + encode_field(1, 5)
    assert field_value(message, 1) == 5 and field_value(message, 2, b"") == b""
    ```
    """
    values = field_list(data, number)
    return values[-1] if values else default


def map_entries(data, number):
    """A `map<string, Message>` field as a dict of key to the value's bytes (map entries: key 1, value 2).

    Example:
    ```python
    from kzoo.serving.wire_format import encode_field, map_entries

    entry = encode_field(1, b"text") + encode_field(2, b"...")
    assert map_entries(encode_field(2, entry), 2) == {"text": b"..."}
    ```
    """
    entries = field_list(data, number)
    return {field_value(entry, 1, b"").decode("utf-8"): field_value(entry, 2, b"") for entry in entries}


def _signed64(value):
    return value - (1 << 64) if value >= 1 << 63 else value


def tensor_shape(data):
    """A TensorShapeProto as a list of sizes (-1 unknown), or None for unknown rank (dim 2 {size 1}; unknown_rank 3).

    Example:
    ```python
    from kzoo.serving.wire_format import encode_field, tensor_shape

    unknown_batch = (-1) & (2**64 - 1)  # int64 -1, as a varint
    shape = encode_field(2, encode_field(1, unknown_batch)) + encode_field(2, encode_field(1, 16))
    assert tensor_shape(shape) == [-1, 16]
    assert tensor_shape(encode_field(3, 1)) is None
    ```
    """
    if field_value(data, 3, 0):
        return None
    return [_signed64(field_value(dim, 1, 0)) for dim in field_list(data, 2)]


def tensor_info(data):
    """A TensorInfo (name 1, dtype 2, tensor_shape 3) as {"name", "dtype", "shape"}.

    Example:
    ```python
    from kzoo.serving.wire_format import DT_STRING, encode_field, tensor_info

    info = encode_field(1, b"serving_default_text:0") + encode_field(2, DT_STRING)
    assert tensor_info(info) == {"name": "serving_default_text:0", "dtype": "string", "shape": []}
    ```
    """
    dtype = field_value(data, 2, 0)
    return {
        "name": field_value(data, 1, b"").decode("utf-8"),
        "dtype": DTYPE_NAMES.get(dtype, f"DataType {dtype}"),
        "shape": tensor_shape(field_value(data, 3, b"")),
    }


def signatures(meta_graph):
    """A MetaGraphDef's signature_def map (field 5) as {name: {"inputs", "outputs", "method_name"}}, where inputs
    and outputs map a key to its `tensor_info` (SignatureDef: inputs 1, outputs 2, method_name 3).

    Example:
    ```python
    import pathlib
    from kzoo.serving.wire_format import meta_graphs, signatures

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        return {"length": tf.strings.length(text)}
    tf.saved_model.save(tf.Module(), "m/1", signatures={"serving_default": serve})
    [(tags, meta_graph)] = meta_graphs(pathlib.Path("m/1/saved_model.pb").read_bytes())
    outputs = signatures(meta_graph)["serving_default"]["outputs"]
    assert outputs["length"]["dtype"] == "int32" and outputs["length"]["shape"] == [-1]
    ```
    """
    result = {}
    for name, signature in map_entries(meta_graph, 5).items():
        result[name] = {
            "inputs": {key: tensor_info(value) for key, value in map_entries(signature, 1).items()},
            "outputs": {key: tensor_info(value) for key, value in map_entries(signature, 2).items()},
            "method_name": field_value(signature, 3, b"").decode("utf-8"),
        }
    return result


def meta_graphs(saved_model):
    """The MetaGraphDefs of a serialized SavedModel (saved_model.pb: meta_graphs 2), each with its tags
    (meta_info_def 1 {tags 4}).

    Example:
    ```python
    import pathlib
    from kzoo.serving.wire_format import meta_graphs

    serve = tf.function(lambda x: {"y": x * 2}, input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(tf.Module(), "m/1", signatures={"serving_default": serve})
    assert [tags for tags, _ in meta_graphs(pathlib.Path("m/1/saved_model.pb").read_bytes())] == [{"serve"}]
    ```
    """
    graphs = []
    for meta_graph in field_list(saved_model, 2):
        info = field_value(meta_graph, 1, b"")
        graphs.append(({tag.decode("utf-8") for tag in field_list(info, 4)}, meta_graph))
    return graphs


def graph_ops(meta_graph):
    """Every op type a MetaGraphDef can run, as {op type: [where it is used]}: the nodes of its graph (graph_def 2:
    node 1, NodeDef.op 2) and of every function in the graph's library (GraphDef.library 2: function 1, whose
    signature 1 has the name 1 and whose node_def 3 holds the body), while-loop and branch bodies included, since
    those are library functions. A function's own name, used as a node's op, is a call, not an op type.

    Example:
    ```python
    import pathlib
    from kzoo.serving.wire_format import graph_ops, meta_graphs

    serve = tf.function(lambda x: {"y": tf.sqrt(x)}, input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(tf.Module(), "m/1", signatures={"serving_default": serve})
    [(_, meta_graph)] = meta_graphs(pathlib.Path("m/1/saved_model.pb").read_bytes())
    ops = graph_ops(meta_graph)
    assert "Sqrt" in ops and all(where.startswith("function ") for where in ops["Sqrt"])
    ```
    """
    graph = field_value(meta_graph, 2, b"")
    library = field_value(graph, 2, b"")
    functions = {}
    for function in field_list(library, 1):
        name = field_value(field_value(function, 1, b""), 1, b"").decode("utf-8")
        functions[name] = [field_value(node, 2, b"").decode("utf-8") for node in field_list(function, 3)]
    uses = {}
    bodies = [("graph", [field_value(node, 2, b"").decode("utf-8") for node in field_list(graph, 1)])]
    bodies += [(f"function {name}", ops) for name, ops in sorted(functions.items())]
    for where, ops in bodies:
        for op in ops:
            if op not in functions:
                uses.setdefault(op, [])
                if where not in uses[op]:
                    uses[op].append(where)
    return uses


def op_names(op_list):
    """The op names of a serialized OpList (op 1, OpDef.name 1), as TF_GetAllOpList returns it.

    Example:
    ```python
    from kzoo.serving.wire_format import encode_field, op_names

    op_list = encode_field(1, encode_field(1, b"MatMul")) + encode_field(1, encode_field(1, b"Softmax"))
    assert op_names(op_list) == {"MatMul", "Softmax"}
    ```
    """
    return {field_value(op, 1, b"").decode("utf-8") for op in field_list(op_list, 1)}


# Writing.

def _encode_varint(value):
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_field(number, value):
    """One field: an int as a varint, bytes (a string or an embedded message) length-delimited.

    Example:
    ```python
    from kzoo.serving.wire_format import encode_field

    assert encode_field(1, 150) == b"\\x08\\x96\\x01"  # key 1 << 3 | 0, then the varint of 150
    assert encode_field(2, b"hi") == b"\\x12\\x02hi"  # key 2 << 3 | 2, the length, the bytes
    ```
    """
    if isinstance(value, int):
        return _encode_varint(number << 3) + _encode_varint(value)
    return _encode_varint(number << 3 | 2) + _encode_varint(len(value)) + bytes(value)


def session_config(intra_op_parallelism=0, inter_op_parallelism=0):
    """A serialized tensorflow.ConfigProto with these thread counts (its fields 2 and 5; 0: TensorFlow's default, one
    thread per core), what TF Serving's `--tensorflow_intra_op_parallelism` / `--tensorflow_inter_op_parallelism`
    set for its sessions.

    Example:
    ```python
    from kzoo.serving.wire_format import session_config

    assert session_config(1, 2) == tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1,
                                                            inter_op_parallelism_threads=2).SerializeToString()
    assert session_config() == b""
    ```
    """
    return b"".join(encode_field(number, value) for number, value in ((2, intra_op_parallelism),
                                                                      (5, inter_op_parallelism)) if value)


def encode_tensor(dtype, shape, values):
    """A TensorProto (dtype 1, tensor_shape 2, then float_val 5 / int_val 7 / string_val 8 / int64_val 10 /
    bool_val 11) holding flat `values` in row-major order.

    Example:
    ```python
    from kzoo.serving.wire_format import encode_tensor

    proto = tf.make_ndarray(tf.make_tensor_proto([0]).FromString(encode_tensor("float32", [2], [0.5, -1.0])))
    np.testing.assert_array_equal(proto, np.array([0.5, -1.0], np.float32))  # TensorFlow reads it
    ```
    """
    shape_proto = b"".join(encode_field(2, encode_field(1, size)) for size in shape)
    out = encode_field(1, DTYPE_NUMBERS[dtype]) + encode_field(2, shape_proto)
    if dtype == "string":
        return out + b"".join(encode_field(8, value) for value in values)
    if dtype == "float32":
        return out + encode_field(5, struct.pack(f"<{len(values)}f", *values)) if values else out
    number = {"int32": 7, "int64": 10, "bool": 11}[dtype]
    return out + encode_field(number, b"".join(_encode_varint(int(v)) for v in values)) if values else out


def encode_tensor_map(number, tensors):
    """A `map<string, TensorProto>` field `number` (PredictRequest.inputs, PredictResponse.outputs): one entry
    {key 1, value 2} per name of `tensors` ({name: (dtype, shape, flat values)}).

    Example:
    ```python
    from kzoo.serving.wire_format import decode_tensor, encode_tensor_map, map_entries

    data = encode_tensor_map(2, {"text": ("string", [1], [b"A dog."])})
    assert decode_tensor(map_entries(data, 2)["text"]) == ("string", [1], [b"A dog."])
    ```
    """
    return b"".join(encode_field(number, encode_field(1, name.encode("utf-8")) + encode_field(2, encode_tensor(*t)))
                    for name, t in tensors.items())


def predict_request(inputs, signature_name="serving_default"):
    """A serialized PredictRequest (model_spec 1 {signature_name 3}, inputs 2: map entries {key 1, value 2}) for
    `inputs` ({name: (dtype, shape, flat values)}). No model name: TF Serving fills it from the URL, and warm-up
    requests need none.

    Example:
    ```python
    from tensorflow_serving.apis import predict_pb2
    from kzoo.serving.wire_format import predict_request

    request = predict_pb2.PredictRequest.FromString(predict_request({"text": ("string", [1], [b"A dog."])}))
    assert request.model_spec.signature_name == "serving_default"
    assert tf.make_ndarray(request.inputs["text"]).tolist() == [b"A dog."]
    ```
    """
    return encode_field(1, encode_field(3, signature_name.encode("utf-8"))) + encode_tensor_map(2, inputs)


def prediction_log(request):
    """A serialized PredictionLog (predict_log 6 {request 1}) around a serialized PredictRequest: a record of TF
    Serving's warm-up file (tensorflow_serving/apis/prediction_log.proto).

    Example:
    ```python
    from tensorflow_serving.apis import prediction_log_pb2
    from kzoo.serving.wire_format import logged_request, prediction_log, predict_request

    request = predict_request({"text": ("string", [1], [b"A dog."])})
    log = prediction_log_pb2.PredictionLog.FromString(prediction_log(request))
    assert log.predict_log.request.SerializeToString() == request and logged_request(prediction_log(request)) == request
    ```
    """
    return encode_field(6, encode_field(1, request))


def logged_request(log):
    """The serialized PredictRequest inside a serialized PredictionLog; a `WireFormatError` for any other log (kzoo's
    contract loader replays Predict logs only).

    Example:
    ```python
    from kzoo.serving.wire_format import WireFormatError, encode_field, logged_request

    assert logged_request(encode_field(6, encode_field(1, b"request"))) == b"request"
    try:
        logged_request(encode_field(2, b"a classify log"))
    except WireFormatError as error:
        assert "not a PredictLog" in str(error)
    ```
    """
    predict_log = field_value(log, 6)
    if predict_log is None:
        raise WireFormatError("a warm-up record that is not a PredictLog (field 6 of PredictionLog): kzoo's contract "
                              "check replays Predict requests only.")
    return field_value(predict_log, 1, b"")


def decode_tensor(data):
    """A TensorProto as (dtype name, shape, flat values), from its typed `*_val` fields or its tensor_content 4.

    Example:
    ```python
    from kzoo.serving.wire_format import decode_tensor

    proto = tf.make_tensor_proto(np.array([[1, -2], [3, 4]], np.int64)).SerializeToString()
    assert decode_tensor(proto) == ("int64", [2, 2], [1, -2, 3, 4])
    ```
    """
    dtype = DTYPE_NAMES.get(field_value(data, 1, 0))
    if dtype is None:
        raise ValueError(f"TensorProto dtype {field_value(data, 1, 0)} is not one kzoo's signatures use "
                         f"({sorted(DTYPE_NAMES.values())}).")
    shape = tensor_shape(field_value(data, 2, b""))
    if shape is None or any(dim < 0 for dim in shape):
        raise ValueError(f"TensorProto shape {shape} is not a known shape: a request tensor needs every size.")
    size = 1
    for dim in shape:
        size *= dim
    content = field_value(data, 4)
    if dtype == "string":
        values = field_list(data, 8)
    elif content is not None:
        code = {"float32": "f", "int32": "i", "int64": "q", "bool": "?"}[dtype]
        if len(content) != size * struct.calcsize(code):
            raise ValueError(f"TensorProto of shape {shape} has {len(content)} bytes of tensor_content; a {dtype} "
                             f"tensor of that shape needs {size * struct.calcsize(code)}.")
        values = list(struct.unpack(f"<{size}{code}", content))
    elif dtype == "float32":
        values = []
        for chunk in field_list(data, 5):
            if isinstance(chunk, bytes) and len(chunk) % 4:
                raise WireFormatError(f"float_val holds {len(chunk)} bytes, not a whole number of floats.")
            values += (list(struct.unpack(f"<{len(chunk) // 4}f", chunk)) if isinstance(chunk, bytes)
                       else [chunk])
    else:
        values = []
        for chunk in field_list(data, {"int32": 7, "int64": 10, "bool": 11}[dtype]):
            if isinstance(chunk, int):
                values.append(chunk)
            else:
                position = 0
                while position < len(chunk):
                    value, position = _varint(chunk, position)
                    values.append(value)
        values = [_signed64(v) if dtype != "bool" else bool(v) for v in values]  # negative ints are 64-bit varints
    if len(values) == 1 and size != 1:  # protocol buffers' shorthand: one value fills the tensor
        if size > MAX_FILLED_VALUES:
            raise ValueError(f"TensorProto of shape {shape} asks for {size} copies of one value; kzoo's contract "
                             f"check fills at most {MAX_FILLED_VALUES}.")
        values = values * size
    if len(values) != size:
        raise ValueError(f"TensorProto of shape {shape} holds {len(values)} values; it needs {size}.")
    return dtype, shape, values
