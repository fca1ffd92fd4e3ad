"""One run of a recipe: the folder it owns, its seed and configuration, the callbacks every recipe trains with, its
artifacts and scores, and the command line that starts it. Each recipe keeps only what is its own.

A run folder holds:
- `run.json`: the recipe, the configuration, kzoo's version, the start and end times, and the status: "running",
  "failed" (with the error) or "finished". Only a "finished" folder is whole; `python -m kzoo.export` refuses others.
- `config.json`: the configuration, as the recipe's dataclass writes it.
- while training: `checkpoints/` (one weights file per epoch), `logs/` (TensorBoard), `history.csv` (a line per
  epoch), `steps.csv` (the loss at every step), `backup/`.
- the artifacts (model.keras, tokenizer.model, ...) and `scores.json`, written under a temporary name and renamed
  into place, and only once training succeeded; scores.json and the "finished" status come last.

A new run needs an empty or absent folder. A folder that holds another run is refused, unless it is resumed (an
unfinished run of the same recipe and configuration: training goes on from its backup) or replaced (the old run is
moved aside, deleted once the new run finishes, and put back if the new run fails).
"""

import argparse
import dataclasses
import json
import logging
import os
import pathlib
import shutil
import time

from kzoo.files import atomic_path, write_atomically
from kzoo.train.recipe_config import add_config_arguments, config_from_arguments

logger = logging.getLogger("kzoo")

RUN_FILE = "run.json"
STATUSES = ("running", "failed", "finished")


def read_run(folder):
    """The contents of `folder/run.json` as a dict, or None when the folder holds no kzoo run.

    Example:
    ```python
    import tempfile
    from kzoo.train.run import Run, read_run

    folder = tempfile.mkdtemp() + "/run"
    with Run(folder, "my_recipe", {"steps": 3}):
        pass
    read_run(folder)["status"], read_run(folder)["config"]  # ("finished", {"steps": 3})
    ```
    """
    path = pathlib.Path(folder) / RUN_FILE
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_text())
    except ValueError as error:
        raise ValueError(f"{path} is not JSON ({error}); the folder's run cannot be read.") from None
    if not isinstance(state, dict) or state.get("status") not in STATUSES:
        raise ValueError(f"{path} does not describe a kzoo run (its status must be one of {STATUSES}).")
    return state


def finished_run(folder):
    """`folder`'s run.json, after checking that the run finished; an error says what the folder holds otherwise.

    Example:
    ```python
    import tempfile
    from kzoo.train.run import Run, finished_run

    folder = tempfile.mkdtemp() + "/run"
    try:
        with Run(folder, "my_recipe", {"steps": 3}):
            raise RuntimeError("out of memory")
    except RuntimeError:
        pass
    try:
        finished_run(folder)
    except ValueError as error:
        print(error)  # ... holds a failed run of my_recipe (started ...: RuntimeError: out of memory): ...
    ```
    """
    folder = pathlib.Path(folder)
    state = read_run(folder)
    if state is None:
        raise FileNotFoundError(f"{folder} holds no kzoo run ({RUN_FILE} is missing): pass the --output folder of a "
                                "recipe run.")
    if state["status"] != "finished":
        raise ValueError(f"{folder} holds a {state['status']} run of {state['recipe']} (started {state['started']}"
                         f"{': ' + state['error'] if state.get('error') else ''}): only a finished run can be used. "
                         f"Resume it with --resume, or use another run.")
    return state


def _is_chief():
    """Whether this process writes the run folder: the chief of a multi-worker TF_CONFIG (its "chief" task, else
    worker 0), or the only process."""
    try:
        config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    except ValueError:
        return True  # kzoo.train.strategy() reports the bad TF_CONFIG
    task = config.get("task", {})
    chief_type = "chief" if config.get("cluster", {}).get("chief") else "worker"
    return not task or (task.get("type") == chief_type and int(task.get("index", 0)) == 0)


class Run:
    """The folder of one recipe run, claimed on entry (`with Run(...) as run:`) and marked finished or failed on exit.

    Args:
        output: str or path. The run folder.
        recipe: str. The recipe's module, e.g. "kzoo.train.translation_recipe".
        config: the recipe's configuration: its dataclass (already checked), or a dict.
        resume: bool. Continue the unfinished run in `output` (same recipe and configuration) from its backup.
        replace: bool. Start over in a folder that holds another run; the old run is deleted once this one finishes.

    Example:
    ```python
    import dataclasses, tempfile
    from kzoo.train.run import Run

    @dataclasses.dataclass
    class Config:
        steps: int = 3

    folder = tempfile.mkdtemp() + "/run"
    with Run(folder, "my_recipe", Config()) as run:
        run.write_json("scores.json", {"accuracy": 1.0})
    Run.status(folder)  # "finished"
    ```
    """

    def __init__(self, output, recipe, config, resume=False, replace=False):
        if resume and replace:
            raise ValueError("resume=True and replace=True: resume an unfinished run, or replace it, not both.")
        self.path = pathlib.Path(output)
        self.recipe = recipe
        self.config = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config)
        self.resume = resume
        self.replace = replace
        self.resumed = False
        self.chief = _is_chief()
        self._aside = self.path.parent / f".{self.path.name}.replaced"
        self._state = None

    @staticmethod
    def status(folder):
        """"running", "failed" or "finished" for a run folder, or None when it holds no kzoo run."""
        state = read_run(folder)
        return None if state is None else state["status"]

    def start(self):
        """Claim the folder (see the class docs), print the configuration and set the seed; returns the run.
        `with Run(...) as run:` calls it, and `finish` or `fail` at the end of the block."""
        import keras

        if self.chief:
            self._claim()
        print("config:", json.dumps(self.config), flush=True)
        if "seed" in self.config:
            keras.utils.set_random_seed(self.config["seed"])
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, kind, error, traceback):
        if error is None:
            self.finish()
        else:
            self.fail(error)
        return False

    def _claim(self):
        state = read_run(self.path) if self.path.is_dir() else None
        occupied = self.path.is_dir() and any(self.path.iterdir())
        if self.resume:
            if state is None:
                raise FileNotFoundError(f"--resume: {self.path} holds no kzoo run to resume ({RUN_FILE} is missing).")
            if state["status"] == "finished":
                raise ValueError(f"--resume: the run in {self.path} already finished; nothing to resume. Pass "
                                 "--replace to train it again, or choose another --output.")
            self._check_same_run(state)
            self.resumed = True
        elif occupied and self.replace:
            if self._aside.exists():
                raise FileExistsError(f"--replace: {self._aside} still holds a run that an earlier --replace of "
                                      f"{self.path} moved aside and did not finish replacing. Delete it, or move it "
                                      "back, first.")
            os.rename(self.path, self._aside)
            logger.info("Moved the run in %s aside to %s; it is deleted once this run finishes.", self.path,
                        self._aside)
        elif occupied:
            if state is None:
                raise FileExistsError(f"{self.path} is not empty and holds no kzoo run: choose an empty or new "
                                      "--output folder.")
            raise FileExistsError(
                f"{self.path} holds a {state['status']} run of {state['recipe']} (started {state['started']}). "
                "Pass --resume to continue an unfinished run, --replace to start over (the old run is deleted once "
                "the new one finishes), or choose another --output."
            )
        self.path.mkdir(parents=True, exist_ok=True)
        self._state = dict(state) if self.resumed else {
            "recipe": self.recipe, "config": self.config, "kzoo": _kzoo_version(), "started": _now()}
        self._state.update(status="running", error=None, finished=None)
        if self.resumed:
            self._state["resumed"] = self._state.get("resumed", []) + [_now()]
        self._write_state()
        if not self.resumed:
            self.write_json("config.json", self.config)

    def _check_same_run(self, state):
        if state["recipe"] != self.recipe:
            raise ValueError(f"--resume: {self.path} holds a run of {state['recipe']}, not of {self.recipe}.")
        changed = {k: (state["config"].get(k), v) for k, v in self.config.items() if state["config"].get(k) != v}
        if changed:
            described = ", ".join(f"{k}: {old!r} then, {new!r} now" for k, (old, new) in changed.items())
            raise ValueError(f"--resume: the run in {self.path} was started with another configuration ({described})."
                             " Resume it with its own flags, or pass --replace to start over.")

    def _write_state(self):
        write_atomically(self.path / RUN_FILE, json.dumps(self._state, indent=2) + "\n")

    def callbacks(self, minutes=None, total_steps=None, checkpoints=True, early_stopping=None,
                  moving_average=None):
        """The callbacks every recipe trains with: a weights checkpoint per epoch (`checkpoints/`), TensorBoard logs
        (`logs/`), the CSV history (`history.csv`) and the loss at every step (`steps.csv`), both continued on
        resume, a per-worker backup that a killed run resumes from (`backup/`), a stop at the first NaN loss, and,
        when given, a time budget in minutes, a stop after exactly `total_steps` optimizer steps, early stopping
        (a dict of `keras.callbacks.EarlyStopping` arguments), and with `moving_average` (a momentum per step) a
        moving average of the weights, saved after every epoch as well (`kzoo.train.MovingAverage`:
        `checkpoints/moving_average_NNN.weights.h5`, see `moving_average_checkpoints`)."""
        import keras

        from kzoo.train.callbacks import MovingAverage, StepLoss, StopAtStep, TimeBudget
        from kzoo.train.fault_tolerance import StopOnNaN, WorkerBackupAndRestore

        callbacks = []
        if checkpoints:
            pattern = str(self.path / "checkpoints" / "epoch_{epoch:03d}.weights.h5")
            (self.path / "checkpoints").mkdir(exist_ok=True)
            callbacks.append(keras.callbacks.ModelCheckpoint(pattern, save_weights_only=True))
        if moving_average is not None:
            folder = self.path / "checkpoints" if self.chief else pathlib.Path(self._scratch())
            folder.mkdir(exist_ok=True)
            callbacks.append(MovingAverage(moving_average, folder / "moving_average_{epoch:03d}.weights.h5"))
        callbacks += [keras.callbacks.TensorBoard(str(self.path / "logs")),
                      keras.callbacks.CSVLogger(str(self.path / "history.csv"), append=self.resumed),
                      StepLoss(self.path / "steps.csv", append=self.resumed)]
        if early_stopping:
            callbacks.append(keras.callbacks.EarlyStopping(**early_stopping))
        if minutes:
            callbacks.append(TimeBudget(minutes))
        if total_steps:
            callbacks.append(StopAtStep(total_steps))
        callbacks += [WorkerBackupAndRestore(self.path / "backup"), StopOnNaN()]
        return callbacks

    def checkpoints(self):
        """This run's epoch checkpoints, oldest first."""
        return sorted((self.path / "checkpoints").glob("epoch_*.weights.h5"))

    def moving_average_checkpoints(self):
        """This run's moving averages of the weights at the end of each epoch (`callbacks(moving_average=...)`),
        oldest first."""
        return sorted((self.path / "checkpoints").glob("moving_average_*.weights.h5"))

    def file(self, name):
        """The path of `name` inside the run folder."""
        return self.path / name

    def artifact(self, name, directory=False):
        """A context manager yielding a temporary path to write the artifact `name` into, renamed into place when
        the block succeeds (see `kzoo.files.atomic_path`). On a non-chief worker, a throwaway path."""
        if not self.chief:
            return atomic_path(pathlib.Path(self._scratch()) / name, directory=directory)
        return atomic_path(self.path / name, directory=directory)

    def write_json(self, name, value):
        """Write `value` as the JSON artifact `name`."""
        if self.chief:
            write_atomically(self.path / name, json.dumps(value, indent=2) + "\n")

    def write_text(self, name, text):
        """Write `text` as the artifact `name`."""
        if self.chief:
            write_atomically(self.path / name, text)

    def _scratch(self):
        import tempfile

        return tempfile.mkdtemp(prefix="kzoo-worker-")

    def finish(self):
        """Mark the run finished (after its artifacts and scores are written) and delete a run it replaced."""
        if not self.chief or self._state is None:
            return
        shutil.rmtree(self.path / "backup", ignore_errors=True)  # a finished run resumes from nothing
        self._state.update(status="finished", finished=_now())
        self._write_state()
        if self._aside.exists():
            shutil.rmtree(self._aside)

    def fail(self, error):
        """Mark the run failed with `error`; a run it was replacing is put back in its place."""
        if not self.chief or self._state is None:
            return
        self._state.update(status="failed", error=f"{type(error).__name__}: {error}", finished=_now())
        self._write_state()
        if self._aside.exists() and not self.resumed:
            shutil.rmtree(self.path)
            os.rename(self._aside, self.path)
            logger.warning("The run failed; %s holds the run it was replacing again.", self.path)


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _kzoo_version():
    from kzoo._version import __version__

    return __version__


def recipe_parser(module, config_class, description, presets=None):
    """The argument parser of a recipe: `--output`, `--resume`, `--replace`, `--verbose`, and a flag for every
    configuration field (help, default and choices from its `setting`). Its usage line shows `python -m module`.

    `presets` ({name: {field: value}}, optional) adds `--preset NAME`: the named configuration's values become the
    defaults, and any flag given beside it still wins (`run_recipe` applies it).

    Example:
    ```python
    from kzoo.train.run import recipe_parser
    from kzoo.train.translation_recipe import TranslationConfig

    parser = recipe_parser("kzoo.train.translation_recipe", TranslationConfig, "Train a translator.")
    parser.format_usage()[:46]  # "usage: python -m kzoo.train.translation_recipe"
    ```
    """
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description,
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--output", required=True, help="the run folder: model, tokenizer, logs, scores")
    parser.add_argument("--resume", action="store_true",
                        help="continue the unfinished run in --output (same flags) from its last backup")
    parser.add_argument("--replace", action="store_true",
                        help="start over in an --output that holds another run; it is deleted once this one finishes")
    parser.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2),
                        help="Keras progress: 0 silent, 1 a bar, 2 a line per epoch")
    if presets:
        listed = "; ".join(f"{name}: " + ", ".join(f"{field}={value}" for field, value in values.items())
                           for name, values in presets.items())
        parser.add_argument("--preset", choices=tuple(presets),
                            help=f"a named configuration of the recipe; other flags override its values ({listed})")
        parser.set_defaults(_presets=presets)
    add_config_arguments(parser, config_class)
    return parser


def parse_recipe_arguments(parser, argv=None):
    """`parser.parse_args(argv)`, with a `--preset`'s values as the defaults of the flags not given.

    Example:
    ```python
    from kzoo.train.run import parse_recipe_arguments, recipe_parser
    from kzoo.train.translation_recipe import MODULE, PRESETS, TranslationConfig

    parser = recipe_parser(MODULE, TranslationConfig, "Train a translator.", presets=PRESETS)
    args = parse_recipe_arguments(parser, ["--output", "run", "--preset", "multi30k_hour", "--beam-size", "6"])
    args.beam_size, args.minutes, args.dropout  # (6, 60.0, 0.2): a flag wins over the preset, the preset over defaults
    ```
    """
    known, _ = parser.parse_known_args(argv)
    presets = getattr(known, "_presets", None)
    if presets and known.preset:
        parser.set_defaults(**presets[known.preset])
    return parser.parse_args(argv)


def run_recipe(module, config_class, train, description, argv=None, parser=None):
    """Parse a recipe's command line, check the configuration, and call `train(config, output, resume=, replace=,
    verbose=, args=)`; returns what `train` returns. A bad flag or value exits with the parser's error before any
    work (and before TensorFlow is imported).

    Example:
    ```python
    import dataclasses, tempfile
    from kzoo.train.recipe_config import check_settings, setting
    from kzoo.train.run import Run, run_recipe

    @dataclasses.dataclass
    class Config:
        steps: int = setting(3, "steps to take", minimum=1)

        def __post_init__(self):
            check_settings(self)

    def train(config, output, resume, replace, verbose, args):
        with Run(output, "my_recipe", config, resume=resume, replace=replace) as run:
            run.write_json("scores.json", {"steps": config.steps})
        return config.steps

    run_recipe("my_recipe", Config, train, "A tiny recipe.", ["--output", tempfile.mkdtemp() + "/run", "--steps", "5"])
    ```
    """
    from kzoo.console import quiet_tensorflow

    quiet_tensorflow()  # before anything imports TensorFlow
    parser = parser or recipe_parser(module, config_class, description)
    args = parse_recipe_arguments(parser, argv)
    try:
        config = config_from_arguments(args, config_class)
    except ValueError as error:
        parser.error(str(error))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    return train(config, args.output, resume=args.resume, replace=args.replace, verbose=args.verbose, args=args)
