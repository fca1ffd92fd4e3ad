"""`python -m kzoo.serving.check saved_models/NAME/VERSION ...`: check SavedModels against TF Serving's contract.

For each SavedModel (a version folder, or a model folder, meaning its newest version, or `saved_models` itself,
meaning every model's newest version), in a fresh process that loads it with TensorFlow's C API as TF Serving does:
- the op audit for the targeted TF Serving release (`--tf-serving`, default 2.20.0) passes;
- `serving_default` takes 1-D string inputs, and every output has the batch as its first dimension;
- sample batches (plain, empty, overlong, non-ASCII text) give outputs of the signature's dtypes and shapes, equal
  to what the same SavedModel gives in this Python process (`tf.saved_model.load`);
- a rank-2 string input is refused.
Exits with status 1 if any model fails; prints what failed.
"""

import argparse
import math
import pathlib
import sys

from kzoo.console import quiet_tensorflow
from kzoo.serving.contract_loader import ContractLoader, ServingError
from kzoo.serving.model_config import saved_model_versions, served_models
from kzoo.serving.op_audit import DEFAULT_TF_SERVING, TF_SERVING_RELEASES

SAMPLE_TEXTS = ["A man in an orange hat starring at something.", "", "Ünïcödé café ☃ 日本語 😀 naïve",
                "A dog runs on the beach. " * 120]


def version_dirs(path):
    """The SavedModel version folders `path` names: itself, its newest version, or each model's newest version."""
    path = pathlib.Path(path)
    if (path / "saved_model.pb").is_file():
        return [path]
    versions = saved_model_versions(path)
    if versions:
        return versions[-1:]
    found = [saved_model_versions(path / name)[-1] for name in served_models(path)] if path.is_dir() else []
    if not found:
        raise FileNotFoundError(f"{path} holds no SavedModel (<model>/<version>/saved_model.pb).")
    return found


def _python_outputs(export_dir, inputs):
    """The same signature run by TensorFlow's Python loader, as flat lists (strings as bytes)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tf-text ops the graph uses)

    serve = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    outputs = serve(**{name: tf.constant(values, tf.string) for name, values in inputs.items()})
    return {name: (value.shape.as_list(), value.numpy().reshape(-1).tolist()) for name, value in outputs.items()}


def _close(a, b, tolerance=1e-5):
    if isinstance(a, bytes) or isinstance(b, bytes):
        return a == b
    return math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)


def check_contract(export_dir, tf_serving=DEFAULT_TF_SERVING, texts=SAMPLE_TEXTS, compare_python=True):
    """Check one SavedModel version; returns a list of problems (empty when it meets the contract)."""
    problems = []
    with ContractLoader(export_dir) as served:
        audit = served.audit(tf_serving)
        problems += [f"op audit: {problem}" for problem in audit.problems]
        signature = served.signatures.get("serving_default")
        if signature is None:
            return problems + [f"no serving_default signature (has {sorted(served.signatures)})"]
        for name, info in signature["inputs"].items():
            if info["dtype"] != "string" or info["shape"] != [-1]:
                problems.append(f"input {name} is {info['dtype']} {info['shape']}, not a batch of strings [-1]")
        for name, info in signature["outputs"].items():
            if not info["shape"] or info["shape"][0] != -1:
                problems.append(f"output {name} has shape {info['shape']}: the batch must be its first dimension")
        for batch in (texts, []):
            inputs = {name: list(batch) for name in signature["inputs"]}
            try:
                outputs = served.rest({"inputs": inputs})["outputs"]
            except ServingError as error:
                problems.append(f"batch of {len(batch)} failed: {error}")
                continue
            outputs = outputs if len(signature["outputs"]) > 1 else {next(iter(signature["outputs"])): outputs}
            for name, value in outputs.items():
                if len(value) != len(batch):
                    problems.append(f"output {name} has {len(value)} rows for a batch of {len(batch)}")
            if compare_python and batch:
                problems += _compare(export_dir, inputs, outputs)
        try:
            served.rest({"inputs": {name: [["two", "dimensions"]] for name in signature["inputs"]}})
            problems.append("a rank-2 string input was accepted; it must be refused")
        except ServingError:
            pass
    return problems


def _flat(value):
    if isinstance(value, list):
        return [v for item in value for v in _flat(item)]
    return [value.encode("utf-8") if isinstance(value, str) else value]


def _compare(export_dir, inputs, outputs):
    problems = []
    for name, (_, expected) in _python_outputs(export_dir, inputs).items():
        found = _flat(outputs[name])
        if len(found) != len(expected) or not all(_close(a, b) for a, b in zip(found, expected)):
            problems.append(f"output {name} differs between TF Serving's loader and TensorFlow's Python loader")
    return problems


def main(argv=None):
    quiet_tensorflow()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="SavedModel version folders, model folders or saved_models/")
    parser.add_argument("--tf-serving", default=DEFAULT_TF_SERVING, choices=sorted(TF_SERVING_RELEASES),
                        help="the TF Serving release whose ops the audit allows")
    args = parser.parse_args(argv)
    failed = False
    for export_dir in [d for path in args.paths for d in version_dirs(path)]:
        problems = check_contract(export_dir, args.tf_serving)
        failed |= bool(problems)
        print(f"{export_dir}: " + ("meets TF Serving's contract" if not problems else "FAILS"))
        for problem in problems:
            print(f"  - {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
