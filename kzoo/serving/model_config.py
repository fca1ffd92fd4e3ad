"""`python -m kzoo.serving.model_config saved_models`: a TF Serving model config file serving every model there.

    python -m kzoo.serving.model_config saved_models > saved_models/models.config
    docker run -p 8500:8500 -p 8501:8501 -v "$PWD/saved_models:/models" tensorflow/serving:2.20.0 \\
        --model_config_file=/models/models.config

Every folder of `saved_models` that holds at least one numeric version folder with a saved_model.pb is a model; TF
Serving serves its newest version and picks up new versions as they appear.
"""

import argparse
import pathlib

from kzoo.console import quiet_tensorflow


def saved_model_versions(model_dir):
    """The version folders of a model folder that hold a saved_model.pb, oldest first (what TF Serving would load).

    Example:
    ```python
    import pathlib
    from kzoo.serving.model_config import saved_model_versions

    for version in ("10", "9", "notes"):
        pathlib.Path("m", version).mkdir(parents=True)
        pathlib.Path("m", version, "saved_model.pb").write_bytes(b"")
    assert [p.name for p in saved_model_versions("m")] == ["9", "10"]
    ```
    """
    versions = [v for v in pathlib.Path(model_dir).glob("*") if v.name.isdigit() and (v / "saved_model.pb").is_file()]
    return sorted(versions, key=lambda v: int(v.name))


def served_models(saved_models_dir):
    """The names of the model folders in `saved_models_dir` that hold a numbered version with a saved_model.pb.

    Example:
    ```python
    import pathlib
    from kzoo.serving.model_config import served_models

    pathlib.Path("saved_models/translator/1").mkdir(parents=True)
    pathlib.Path("saved_models/translator/1/saved_model.pb").write_bytes(b"")
    pathlib.Path("saved_models/empty").mkdir()
    assert served_models("saved_models") == ["translator"]
    ```
    """
    root = pathlib.Path(saved_models_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder: pass the folder holding <model>/<version>/saved_model.pb.")
    return sorted(model.name for model in root.iterdir() if model.is_dir() and saved_model_versions(model))


def model_config(names, base_path="/models"):
    """The text of a TF Serving `--model_config_file` (a ModelServerConfig in protobuf text format).

    Example:
    ```python
    from kzoo.serving import model_config

    text = model_config(["translator"])
    assert 'name: "translator"' in text and 'base_path: "/models/translator"' in text
    ```
    """
    if not names:
        raise ValueError("no models to serve: export one first (python -m kzoo.export ...).")
    entries = "".join(
        f'  config {{\n    name: "{name}"\n    base_path: "{base_path.rstrip("/")}/{name}"\n'
        f'    model_platform: "tensorflow"\n  }}\n'
        for name in names
    )
    return f"model_config_list {{\n{entries}}}\n"


def main(argv=None):
    """The command line: print the model config file for the models in a saved_models folder.

    Example:
    ```python
    import contextlib, io, pathlib
    from kzoo.serving.model_config import main

    pathlib.Path("saved_models/embedder/3").mkdir(parents=True)
    pathlib.Path("saved_models/embedder/3/saved_model.pb").write_bytes(b"")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        main(["saved_models", "--base-path", "/srv/models"])
    assert 'base_path: "/srv/models/embedder"' in printed.getvalue()
    ```
    """
    quiet_tensorflow()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("saved_models", help="the folder of <model>/<version>/ SavedModels")
    parser.add_argument("--base-path", default="/models", help="where that folder is mounted in the server")
    args = parser.parse_args(argv)
    print(model_config(served_models(args.saved_models), args.base_path), end="")


if __name__ == "__main__":
    main()
