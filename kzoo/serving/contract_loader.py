"""Run a SavedModel through TF Serving's own loading path, in a separate process, from Python."""

import base64
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from kzoo.serving.op_audit import DEFAULT_TF_SERVING, audit_ops

LOADER = pathlib.Path(__file__).resolve().parent / "c_api_loader.py"


class ServingError(RuntimeError):
    """A request the served model answered with an error (TF Serving would send it with a non-OK status), or a
    model that does not load.

    Example:
    ```python
    from kzoo.serving import ContractLoader, ServingError

    try:
        ContractLoader("saved_models/none")
    except FileNotFoundError as error:
        assert "has no saved_model.pb" in str(error)
    assert issubclass(ServingError, RuntimeError)
    ```
    """


def tensorflow_cause(message):
    """TensorFlow's error message without the graph locations it appends (`[[{{function_node ...}}]]`) and the
    loader's own prefix: the cause, as one line.

    Example:
    ```python
    from kzoo.serving.contract_loader import tensorflow_cause

    message = ("TF_LoadSessionFromSavedModel(m/1) failed: Read less bytes than requested\\n"
               "\\t [[{{function_node __inference__traced_restore_179}}{{node RestoreV2}}]]")
    assert tensorflow_cause(message) == "Read less bytes than requested"
    ```
    """
    lines = [line.strip() for line in str(message).splitlines()]
    lines = [line for line in lines if line and not line.startswith("[[")]
    cause = " ".join(lines)
    return cause.split(" failed: ", 1)[1] if cause.startswith("TF_") and " failed: " in cause else cause


class ContractLoader:
    """A SavedModel loaded by TensorFlow's C API (`TF_LoadSessionFromSavedModel`), as TF Serving loads it.

    Starts `c_api_loader.py` in a fresh Python process (`python -I`: no kzoo, and the script refuses to run if
    TensorFlow's or Keras's Python got imported), with the tensorflow-text op libraries registered, and talks to it
    over pipes. Requests are TF Serving's own: REST bodies (`rest`), serialized `PredictRequest`s (`grpc`).

    The version's warm-up requests (assets.extra/tf_serving_warmup_requests) are replayed at load, as TF Serving
    replays them (unless `warmup=False`); `warmup` says how many and how long they took (None without a warm-up
    file or replay), and one that fails fails the load. `intra_op_parallelism` and `inter_op_parallelism` are TF
    Serving's `--tensorflow_intra_op_parallelism` / `--tensorflow_inter_op_parallelism` (0: one thread per core).
    `environment` ({name: value}) is added to the loader process's environment, as to TF Serving's (`docker run -e`):
    TensorFlow's runtime settings, such as `{"TF_ENABLE_ONEDNN_OPTS": "0"}`.
    A model that does not load raises `ServingError` with TensorFlow's cause (`Read less bytes than requested`,
    `Checksum does not match ...`). A request TF Serving would refuse raises `ServingError` with the message TF
    Serving sends; the loader process goes on.

    Example:
    ```python
    from kzoo.serving import ContractLoader, ServingError

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        return {"length": tf.strings.length(text)}
    tf.saved_model.save(tf.Module(), "m/1", signatures={"serving_default": serve})

    with ContractLoader("m/1") as served:
        assert served.signatures["serving_default"]["outputs"]["length"]["shape"] == [-1]
        assert served.rest({"instances": ["abc", {"b64": "aGk="}]}) == {"predictions": [3, 2]}
        try:
            served.rest({"instances": [{"b64": 5}]})
        except ServingError as error:
            assert "not formatted correctly for base64 data" in str(error)
        assert served.audit().ok
    ```
    """

    def __init__(self, export_dir, timeout=600, warmup=True, intra_op_parallelism=0, inter_op_parallelism=0,
                 environment=None):
        for name, value in (environment or {}).items():
            if not (isinstance(name, str) and isinstance(value, str)):
                raise TypeError(f"environment[{name!r}]={value!r}: environment variables are strings, as in a shell "
                                f"(pass {str(value)!r}).")
        export_dir = pathlib.Path(export_dir)
        if not (export_dir / "saved_model.pb").is_file():
            raise FileNotFoundError(f"{export_dir} has no saved_model.pb: pass a version folder, such as "
                                    "saved_models/<name>/<version>.")
        self.export_dir = export_dir
        self.timeout = timeout
        self._log = tempfile.TemporaryFile(mode="w+")  # TensorFlow's log: a file, so a full pipe never blocks it
        flags = ([] if warmup else ["--no-warmup"]) + [
            f"--tensorflow_{kind}_op_parallelism={threads}"
            for kind, threads in (("intra", intra_op_parallelism), ("inter", inter_op_parallelism)) if threads]
        self._process = subprocess.Popen([sys.executable, "-I", str(LOADER), str(export_dir.resolve()), *flags],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                         text=True, bufsize=1, env={**os.environ, **(environment or {})})
        ready = self._read()
        if not ready.get("ready"):
            self.close()
            raise ServingError(f"{export_dir} does not load as TF Serving loads it: "
                               f"{tensorflow_cause(ready.get('error', ready))}")
        self.warmup = ready.get("warmup")  # {"requests", "seconds"} replayed at load, or None without a warm-up file
        self.signatures = self._ask({"signatures": True})["signatures"]

    def _read(self):
        line = self._process.stdout.readline()
        if not line:
            self._process.wait(timeout=self.timeout)
            self._log.seek(0)
            raise ServingError(f"the C API loader for {self.export_dir} exited with {self._process.returncode}: "
                               f"{self._log.read()[-4000:]}")
        return json.loads(line)

    def _ask(self, request):
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        answer = self._read()
        if "error" in answer:
            raise ServingError(answer["error"])
        return answer

    def rest(self, body):
        """A REST Predict body (dict) to the response body (dict); `ServingError` where TF Serving sends an error."""
        return self._ask({"rest": body})["rest"]

    def grpc(self, request):
        """A `PredictRequest` (message or serialized bytes) to the serialized `PredictResponse`."""
        data = request if isinstance(request, bytes) else request.SerializeToString()
        return base64.b64decode(self._ask({"grpc": base64.b64encode(data).decode("ascii")})["grpc"])

    def ops(self):
        """{"graph_ops": {op: [where]}, "core_ops": [...], "text_ops": [...]}, as the loader process sees them."""
        return self._ask({"ops": True})

    def audit(self, tf_serving=DEFAULT_TF_SERVING):
        """`kzoo.serving.audit_ops` for this model and release."""
        ops = self.ops()
        return audit_ops(ops["graph_ops"], set(ops["core_ops"]), set(ops["text_ops"]), tf_serving)

    def close(self):
        if self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait(timeout=60)
        self._process.stdout.close()
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
