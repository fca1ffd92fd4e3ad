"""`python -m kzoo.serving.check saved_models/NAME/VERSION ...`: check SavedModels against TF Serving's contract.

For each SavedModel (a version folder, or a model folder, meaning its newest version, or `saved_models` itself,
meaning every model's newest version), in a fresh process that loads it with TensorFlow's C API as TF Serving does
(and replays its warm-up requests, assets.extra/tf_serving_warmup_requests, as TF Serving does; `--no-warmup` skips
them):
- the op audit for the targeted TF Serving release (`--tf-serving`, default 2.20.0) passes;
- `serving_default` takes 1-D string inputs, and every output has the batch as its first dimension;
- sample batches (plain, empty, overlong, non-ASCII text) give outputs of the signature's dtypes and shapes, equal
  to what the same SavedModel gives in this Python process (`tf.saved_model.load`);
- a rank-2 string input is refused.
Every model is checked, whatever the others give; one line per model says whether it meets the contract or what
fails (for a model that does not load, TensorFlow's cause: `Read less bytes than requested`, `Checksum does not
match`), and a summary follows. Exits with status 1 if any model fails.
"""

import argparse
import math
import pathlib
import sys

from kzoo.console import quiet_tensorflow
from kzoo.serving.contract_loader import ContractLoader, ServingError
from kzoo.serving.op_audit import DEFAULT_TF_SERVING, TF_SERVING_RELEASES

SAMPLE_TEXTS = ["A man in an orange hat starring at something.", "", "Ünïcödé café ☃ 日本語 😀 naïve",
                "A dog runs on the beach. " * 120]


def _newest_version(model_dir):
    """The highest numbered subfolder of a model folder (the one TF Serving serves), or None."""
    versions = [v for v in model_dir.iterdir() if v.is_dir() and v.name.isdigit()] if model_dir.is_dir() else []
    return max(versions, key=lambda v: int(v.name), default=None)


def version_dirs(path):
    """The SavedModel version folders `path` names: itself, its newest version, or each model's newest version. The
    newest numbered folder counts even without a saved_model.pb: TF Serving would try to serve it.

    Example:
    ```python
    import pathlib
    from kzoo.serving.check import version_dirs

    for version in ("a/1", "a/2", "b/7"):
        pathlib.Path("saved_models", version).mkdir(parents=True)
        pathlib.Path("saved_models", version, "saved_model.pb").write_bytes(b"")
    assert [str(p) for p in version_dirs("saved_models")] == ["saved_models/a/2", "saved_models/b/7"]
    assert [str(p) for p in version_dirs("saved_models/a")] == ["saved_models/a/2"]
    assert [str(p) for p in version_dirs("saved_models/a/1")] == ["saved_models/a/1"]
    ```
    """
    path = pathlib.Path(path)
    if (path / "saved_model.pb").is_file():
        return [path]
    newest = _newest_version(path)
    if newest is not None:
        return [newest]
    models = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")) if path.is_dir() else []
    found = [version for version in map(_newest_version, models) if version is not None]
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


def check_contract(export_dir, tf_serving=DEFAULT_TF_SERVING, texts=SAMPLE_TEXTS, compare_python=True, warmup=True):
    """Check one SavedModel version; returns a list of problems (empty when it meets the contract). A model that
    does not load raises `kzoo.serving.ServingError` with TensorFlow's cause; so does a warm-up request that fails
    (assets.extra/tf_serving_warmup_requests, replayed at load as TF Serving does, unless `warmup=False`).

    Example:
    ```python
    from kzoo.serving.check import check_contract

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        return {"length": tf.strings.length(tf.ensure_shape(text, [None]))}  # refuses a rank-2 batch
    tf.saved_model.save(tf.Module(), "m/1", signatures={"serving_default": serve})
    assert check_contract("m/1") == []
    ```
    """
    problems = []
    with ContractLoader(export_dir, warmup=warmup) as served:
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


def check_paths(paths, tf_serving=DEFAULT_TF_SERVING, compare_python=True, print_line=print, warmup=True):
    """Check every SavedModel the `paths` name (see `version_dirs`), each in its own loader process, whatever the
    others give: one line per model (`meets TF Serving's contract`, or `FAILS: ` and the causes, such as TensorFlow's
    `Read less bytes than requested`), then a summary. Returns {path: problems}.

    Example:
    ```python
    import pathlib
    from kzoo.serving.check import check_paths

    pathlib.Path("saved_models/broken/1").mkdir(parents=True)  # a version folder without a SavedModel
    lines = []
    results = check_paths(["saved_models", "nowhere"], print_line=lines.append)
    assert lines[0].startswith("saved_models/broken/1: FAILS: saved_models/broken/1 has no saved_model.pb")
    assert lines[1].startswith("nowhere: FAILS: nowhere holds no SavedModel")
    assert lines[-1] == "2 checked: 0 meet TF Serving's contract, 2 fail."
    assert len(results) == 2 and all(results.values())
    ```
    """
    results = {}
    for path in paths:
        try:
            export_dirs = version_dirs(path)
        except OSError as error:
            export_dirs, results[str(path)] = [], [str(error)]
        for export_dir in export_dirs:
            try:
                results[str(export_dir)] = check_contract(export_dir, tf_serving, compare_python=compare_python,
                                                          warmup=warmup)
            except (ServingError, OSError) as error:  # it does not load, or its loader died: say why, go on
                results[str(export_dir)] = [str(error)]
    for name, problems in results.items():
        print_line(f"{name}: " + ("FAILS: " + "; ".join(problems) if problems else "meets TF Serving's contract"))
    failed = sum(bool(problems) for problems in results.values())
    print_line(f"{len(results)} checked: {len(results) - failed} meet TF Serving's contract, {failed} fail.")
    return results


def main(argv=None):
    """The command line: check the SavedModels named, print one line per model and a summary; returns the exit status
    (1 if any model fails).

    Example:
    ```python
    from kzoo.serving.check import main

    assert main(["no_such_folder"]) == 1  # prints "no_such_folder: FAILS: no_such_folder holds no SavedModel ..."
    ```
    """
    quiet_tensorflow()
    parser = argparse.ArgumentParser(prog="python -m kzoo.serving.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="SavedModel version folders, model folders or saved_models/")
    parser.add_argument("--tf-serving", default=DEFAULT_TF_SERVING, choices=sorted(TF_SERVING_RELEASES),
                        help="the TF Serving release whose ops the audit allows")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="do not replay the versions' warm-up requests at load (TF Serving replays them)")
    args = parser.parse_args(argv)
    results = check_paths(args.paths, args.tf_serving, warmup=args.warmup)
    return 1 if any(results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
