"""Load a SavedModel the way TF Serving does and answer Predict requests, with no TensorFlow Python.

    python kzoo/serving/c_api_loader.py saved_models/transformer_multi30k_en_de/9 [--no-warmup]
        [--tensorflow_intra_op_parallelism=N] [--tensorflow_inter_op_parallelism=N]

TF Serving loads a model with the C++ `tensorflow::LoadSavedModel` (tag "serve") and answers Predict with
`Session::Run` on the tensor names of the requested SignatureDef. The TensorFlow wheel exports that loader through
its C API, `TF_LoadSessionFromSavedModel` in libtensorflow_cc.so.2, and the tensorflow-text op libraries (which
TF Serving links in) are registered with `TF_LoadLibrary`. This script does exactly that through ctypes, in a
process that imports neither `tensorflow` nor `keras` (it checks), so nothing Python-side can stand in for what
the server would do.

It reads one JSON request per line on stdin and writes one JSON answer per line on stdout:
- `{"signatures": true}` → `{"signatures": {name: {"inputs", "outputs", "method_name"}}}`
- `{"rest": BODY}` → `{"rest": RESPONSE_BODY}`: TF Serving's REST Predict (see rest_json.py)
- `{"grpc": BASE64}` (a serialized tensorflow.serving.PredictRequest) → `{"grpc": BASE64}` (a PredictResponse)
- `{"ops": true}` → `{"graph_ops": {op: [where]}, "core_ops": [...], "text_ops": [...]}`: the model's op types
  (graph and function library) and the ops registered before and after the tensorflow-text libraries.
A failed request gives `{"error": "..."}`, as TF Serving's error status would; the process goes on. A model that
does not load gives one `{"error": "..."}` line (TensorFlow's message, as TF Serving would log it) and exit status 1.
A version's warm-up requests (assets.extra/tf_serving_warmup_requests, see warmup.py) are replayed at load, before
the ready line (which says how many and how long they took), as TF Serving replays them; one that fails fails the load.
The two thread flags are TF Serving's own, with its meaning (0, the default: one thread per core).

kzoo.serving.ContractLoader runs this script and speaks the protocol for Python callers.
"""

import base64
import ctypes
import importlib.util
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # run as a file: its siblings, not kzoo

import rest_json  # noqa: E402
import warmup  # noqa: E402
import wire_format  # noqa: E402

TF_TSTRING_SIZE = 24  # sizeof(TF_TString), tensorflow/core/platform/ctstring_internal.h
_TF_DTYPES = {"float32": 1, "int32": 3, "string": 7, "int64": 9, "bool": 10}
_TF_DTYPE_NAMES = {number: name for name, number in _TF_DTYPES.items()}
_CTYPES = {"float32": ctypes.c_float, "int32": ctypes.c_int32, "int64": ctypes.c_int64, "bool": ctypes.c_bool}


class _Buffer(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_size_t), ("data_deallocator", ctypes.c_void_p)]


class _Output(ctypes.Structure):
    _fields_ = [("oper", ctypes.c_void_p), ("index", ctypes.c_int)]


def package_dir(name):
    """A package's folder, found without importing (running) the package.

    Example:
    ```python
    from kzoo.serving.c_api_loader import package_dir

    assert (package_dir("tensorflow") / "libtensorflow_cc.so.2").is_file()
    assert sorted(package_dir("tensorflow_text").glob("python/ops/*.so"))  # the op libraries TF Serving links in
    ```
    """
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"the {name} package is not installed: pip install {name.replace('_', '-')}")
    return pathlib.Path(spec.origin).parent


def _c_api(tensorflow_dir):
    library = ctypes.CDLL(str(tensorflow_dir / "libtensorflow_cc.so.2"), mode=ctypes.RTLD_GLOBAL)
    p, i, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    signatures = {
        "TF_NewStatus": (p, []), "TF_DeleteStatus": (None, [p]), "TF_GetCode": (i, [p]),
        "TF_Message": (ctypes.c_char_p, [p]), "TF_NewGraph": (p, []), "TF_NewSessionOptions": (p, []),
        "TF_SetConfig": (None, [p, ctypes.c_char_p, s, p]),
        "TF_NewBuffer": (ctypes.POINTER(_Buffer), []), "TF_DeleteBuffer": (None, [ctypes.POINTER(_Buffer)]),
        "TF_LoadSessionFromSavedModel": (p, [p, p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), i, p,
                                             ctypes.POINTER(_Buffer), p]),
        "TF_GraphOperationByName": (p, [p, ctypes.c_char_p]),
        "TF_SessionRun": (None, [p, p, ctypes.POINTER(_Output), ctypes.POINTER(p), i, ctypes.POINTER(_Output),
                                 ctypes.POINTER(p), i, p, i, p, p]),
        "TF_AllocateTensor": (p, [i, ctypes.POINTER(ctypes.c_int64), i, s]), "TF_DeleteTensor": (None, [p]),
        "TF_TensorData": (p, [p]), "TF_TensorType": (i, [p]), "TF_NumDims": (i, [p]),
        "TF_Dim": (ctypes.c_int64, [p, i]), "TF_StringInit": (None, [p]),
        "TF_StringCopy": (None, [p, ctypes.c_char_p, s]), "TF_StringGetDataPointer": (p, [p]),
        "TF_StringGetSize": (s, [p]), "TF_LoadLibrary": (p, [ctypes.c_char_p, p]),
        "TF_GetAllOpList": (ctypes.POINTER(_Buffer), []),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(library, name)
        function.restype, function.argtypes = restype, argtypes
    return library


class CApiModel:
    """A SavedModel loaded by `TF_LoadSessionFromSavedModel`, run with `TF_SessionRun` on signature tensor names.

    It runs in a process that has imported no TensorFlow Python (this script's `main`; `kzoo.serving.ContractLoader`
    starts it); a model that does not load raises `RuntimeError` with TensorFlow's message.

    Example:
    ```python
    import pathlib, subprocess, sys
    from kzoo.serving import c_api_loader

    serve = tf.function(lambda x: {"y": 2 * x}, input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(tf.Module(), "m/1", signatures={"serving_default": serve})
    script = ("import sys; sys.path.insert(0, sys.argv[1]); from c_api_loader import CApiModel; "
              "print(CApiModel('m/1').run('serving_default', {'x': ('float32', [2], [1.5, -2.0])}))")
    found = subprocess.run([sys.executable, "-I", "-c", script, str(pathlib.Path(c_api_loader.__file__).parent)],
                           capture_output=True, text=True).stdout
    assert found.strip() == "{'y': ('float32', [2], [3.0, -4.0])}"
    ```
    """

    def __init__(self, export_dir, tensorflow_dir=None, text_ops_dir=None, warm_up=True, intra_op_parallelism=0,
                 inter_op_parallelism=0):
        self.tf = _c_api(pathlib.Path(tensorflow_dir) if tensorflow_dir else package_dir("tensorflow"))
        self.status = self.tf.TF_NewStatus()  # one TF_Status, reused by every call
        self.core_ops = self._registered_ops()
        text_ops_dir = pathlib.Path(text_ops_dir) if text_ops_dir else package_dir("tensorflow_text") / "python/ops"
        for library in sorted(text_ops_dir.glob("*.so")):
            self._check(self.tf.TF_LoadLibrary(str(library).encode(), self.status), f"TF_LoadLibrary({library})")
        self.text_ops = self._registered_ops() - self.core_ops
        self.graph = self.tf.TF_NewGraph()
        meta_graph = self.tf.TF_NewBuffer()
        tags = (ctypes.c_char_p * 1)(b"serve")
        options = self.tf.TF_NewSessionOptions()
        config = wire_format.session_config(intra_op_parallelism, inter_op_parallelism)
        if config:
            self._check(self.tf.TF_SetConfig(options, config, len(config), self.status), "TF_SetConfig")
        self.session = self.tf.TF_LoadSessionFromSavedModel(
            options, None, str(export_dir).encode(), tags, 1, self.graph, meta_graph,
            self.status)
        self._check(self.session, f"TF_LoadSessionFromSavedModel({export_dir})")
        self.meta_graph = ctypes.string_at(meta_graph.contents.data, meta_graph.contents.length)
        self.tf.TF_DeleteBuffer(meta_graph)
        self.signatures = wire_format.signatures(self.meta_graph)
        self.warmup = self._warm_up(pathlib.Path(export_dir) / "assets.extra" / warmup.WARMUP_FILE) if warm_up else None

    def _warm_up(self, path):
        """Replay the version's warm-up requests, as TF Serving does at load: {"requests": n, "seconds": s}, or None
        without a warm-up file. A request that fails fails the load (TF Serving then does not serve the version)."""
        if not path.is_file():
            return None
        start = time.perf_counter()
        records = warmup.read_tfrecords(path.read_bytes())
        if len(records) > warmup.MAX_RECORDS:
            raise RuntimeError(f"{path} holds {len(records)} warm-up records; TF Serving reads at most "
                               f"{warmup.MAX_RECORDS}.")
        for k, record in enumerate(records):
            try:
                self.grpc(wire_format.logged_request(record))
            except (RuntimeError, ValueError) as error:
                raise RuntimeError(f"warm-up request {k} of {path} failed: {error}") from None
        return {"requests": len(records), "seconds": round(time.perf_counter() - start, 3)}

    def _check(self, result, what):
        if self.tf.TF_GetCode(self.status) != 0:
            raise RuntimeError(f"{what} failed: {self.tf.TF_Message(self.status).decode('utf-8', 'replace')}")
        return result

    def _registered_ops(self):
        buffer = self.tf.TF_GetAllOpList()
        ops = wire_format.op_names(ctypes.string_at(buffer.contents.data, buffer.contents.length))
        self.tf.TF_DeleteBuffer(buffer)
        return ops

    def _output(self, tensor_name):
        op_name, _, index = tensor_name.partition(":")
        operation = self.tf.TF_GraphOperationByName(self.graph, op_name.encode())
        if not operation:
            raise RuntimeError(f"the graph has no operation {op_name!r} (signature tensor {tensor_name!r}).")
        return _Output(operation, int(index or 0))

    def _tensor(self, dtype, shape, values):
        size = 1
        for dim in shape:
            size *= dim
        dims = (ctypes.c_int64 * len(shape))(*shape)
        if dtype == "string":
            tensor = self.tf.TF_AllocateTensor(_TF_DTYPES[dtype], dims, len(shape), size * TF_TSTRING_SIZE)
            data = self.tf.TF_TensorData(tensor)
            for k, value in enumerate(values):
                element = data + k * TF_TSTRING_SIZE
                self.tf.TF_StringInit(element)
                self.tf.TF_StringCopy(element, value, len(value))
            return tensor
        c_type = _CTYPES[dtype]
        tensor = self.tf.TF_AllocateTensor(_TF_DTYPES[dtype], dims, len(shape), size * ctypes.sizeof(c_type))
        if size:
            ctypes.memmove(self.tf.TF_TensorData(tensor), (c_type * size)(*values), size * ctypes.sizeof(c_type))
        return tensor

    def _values(self, tensor):
        dtype = _TF_DTYPE_NAMES.get(self.tf.TF_TensorType(tensor))
        if dtype is None:
            raise RuntimeError(f"output DataType {self.tf.TF_TensorType(tensor)} is not one kzoo's contract reads.")
        shape = [self.tf.TF_Dim(tensor, d) for d in range(self.tf.TF_NumDims(tensor))]
        size = 1
        for dim in shape:
            size *= dim
        data = self.tf.TF_TensorData(tensor)
        if dtype == "string":
            values = []
            for k in range(size):
                element = data + k * TF_TSTRING_SIZE
                values.append(ctypes.string_at(self.tf.TF_StringGetDataPointer(element),
                                               self.tf.TF_StringGetSize(element)))
        else:
            values = list((_CTYPES[dtype] * size).from_address(data)) if size else []
        return dtype, shape, values

    def run(self, signature_name, inputs, output_filter=()):
        """{input key: (dtype, shape, flat values)} to {output key: (dtype, shape, flat values)} for a signature."""
        if signature_name not in self.signatures:
            raise rest_json.RequestError(f"Serving signature name: \"{signature_name}\" not found in signature def")
        signature = self.signatures[signature_name]
        if set(inputs) != set(signature["inputs"]):
            raise rest_json.RequestError(f"inputs {sorted(inputs)} do not match the signature's "
                                         f"{sorted(signature['inputs'])}.")
        keys = [key for key in signature["outputs"] if not output_filter or key in output_filter]
        feeds = [self._output(signature["inputs"][key]["name"]) for key in inputs]
        fetches = [self._output(signature["outputs"][key]["name"]) for key in keys]
        values = []
        for key, (dtype, shape, flat) in inputs.items():
            expected = signature["inputs"][key]["dtype"]
            if dtype != expected:
                raise rest_json.RequestError(f"input {key!r} is {dtype}; the signature expects {expected}.")
            values.append(self._tensor(dtype, shape, flat))
        results = (ctypes.c_void_p * len(fetches))()
        try:
            self.tf.TF_SessionRun(self.session, None, (_Output * len(feeds))(*feeds),
                                  (ctypes.c_void_p * len(values))(*values), len(values),
                                  (_Output * len(fetches))(*fetches), results, len(fetches), None, 0, None,
                                  self.status)
            self._check(None, "TF_SessionRun")
            return {key: self._values(results[k]) for k, key in enumerate(keys)}
        finally:
            for tensor in [*values, *(r for r in results if r)]:
                self.tf.TF_DeleteTensor(tensor)

    def rest(self, body):
        name, inputs, row_form = rest_json.request_tensors(body, self.signatures)
        return rest_json.response_body(self.run(name, inputs), row_form)

    def grpc(self, request):
        """A serialized PredictRequest (model_spec 1 {signature_name 3}, inputs 2, output_filter 3) to a
        serialized PredictResponse (outputs 1, model_spec 2)."""
        model_spec = wire_format.field_value(request, 1, b"")
        name = wire_format.field_value(model_spec, 3, b"").decode("utf-8") or rest_json.DEFAULT_SIGNATURE
        inputs = {key: wire_format.decode_tensor(value)
                  for key, value in wire_format.map_entries(request, 2).items()}
        output_filter = [value.decode("utf-8") for value in wire_format.field_list(request, 3)]
        outputs = self.run(name, inputs, output_filter)
        return wire_format.encode_tensor_map(1, outputs) + wire_format.encode_field(2, model_spec)

    def answer(self, request):
        """One protocol request (a dict) to its answer (a dict)."""
        try:
            if "signatures" in request:
                return {"signatures": self.signatures}
            if "ops" in request:
                return {"graph_ops": wire_format.graph_ops(self.meta_graph), "core_ops": sorted(self.core_ops),
                        "text_ops": sorted(self.text_ops)}
            if "rest" in request:
                return {"rest": self.rest(request["rest"])}
            if "grpc" in request:
                return {"grpc": base64.b64encode(self.grpc(base64.b64decode(request["grpc"]))).decode("ascii")}
            return {"error": f"unknown request {sorted(request)}; send signatures, ops, rest or grpc."}
        except (RuntimeError, ValueError) as error:
            return {"error": str(error)}
        except Exception as error:  # a server answers every request; it never dies on one
            return {"error": f"{type(error).__name__}: {error}"}


def main(argv):
    """The script: load the SavedModel `argv[0]` (and replay its warm-up requests, unless a flag is `--no-warmup`;
    with TF Serving's thread flags, `--tensorflow_intra_op_parallelism=N` and `--tensorflow_inter_op_parallelism=N`,
    its session runs with those threads), then answer one JSON request per stdin line (see the module's
    docstring); returns the exit status.

    Example:
    ```python
    import json, subprocess, sys
    from kzoo.serving import c_api_loader

    serve = tf.function(lambda text: {"length": tf.strings.length(text)},
                        input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(tf.Module(), "m/1", signatures={"serving_default": serve})
    requests = [{"rest": {"instances": ["abc", "de"]}}, {"rest": {"instances": [{"b64": 5}]}}]
    answers = subprocess.run([sys.executable, "-I", c_api_loader.__file__, "m/1"], capture_output=True, text=True,
                             input="".join(json.dumps(r) + "\\n" for r in requests)).stdout.splitlines()
    assert json.loads(answers[0]) == {"ready": True, "python_modules": [], "warmup": None}  # no warm-up file
    assert json.loads(answers[1]) == {"rest": {"predictions": [3, 2]}}
    assert "not formatted correctly for base64 data" in json.loads(answers[2])["error"]  # and it went on
    ```
    """
    threads = {"--tensorflow_intra_op_parallelism": 0, "--tensorflow_inter_op_parallelism": 0}
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    for flag in argv[1:]:
        name, _, value = flag.partition("=")
        if name in threads and value.isdigit():
            threads[name] = int(value)
        elif flag != "--no-warmup":
            print(f"c_api_loader: {flag!r} is not a flag it takes; it takes --no-warmup, "
                  f"{'=N, '.join(threads)}=N (N a whole number, 0 for TensorFlow's default).", file=sys.stderr)
            return 2
    try:
        model = CApiModel(argv[0], warm_up="--no-warmup" not in argv[1:],
                          intra_op_parallelism=threads["--tensorflow_intra_op_parallelism"],
                          inter_op_parallelism=threads["--tensorflow_inter_op_parallelism"])
    except RuntimeError as error:  # a model that does not load: say why, as TF Serving's log would
        print(json.dumps({"error": str(error)}), flush=True)
        return 1
    python_frameworks = sorted(name for name in ("tensorflow", "keras", "tf_keras") if name in sys.modules)
    if python_frameworks:
        raise RuntimeError(f"{python_frameworks} were imported: the contract process must run no framework Python.")
    print(json.dumps({"ready": True, "python_modules": python_frameworks, "warmup": model.warmup}), flush=True)
    for line in sys.stdin:
        if line.strip():
            try:
                request = json.loads(line)
            except ValueError as error:
                print(json.dumps({"error": f"JSON Parse error: {error}"}), flush=True)
                continue
            answer = model.answer(request) if isinstance(request, dict) else {"error": "a request is a JSON object"}
            print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
