"""The run scaffold: a run folder is claimed, never overwritten, resumed or replaced only when asked, and says
whether its run finished; configurations are checked before any work; the recipes' command lines help."""

import dataclasses
import json
import subprocess
import sys

import pytest

from kzoo.train.bert_finetuning_recipe import FinetuningConfig
from kzoo.train.bert_pretraining_recipe import PretrainingConfig
from kzoo.train.recipe_config import check_settings, config_from_arguments, setting
from kzoo.train.run import Run, finished_run, read_run
from kzoo.train.translation_recipe import TranslationConfig


@dataclasses.dataclass
class Config:
    steps: int = setting(3, "steps to take", minimum=1)
    rate: float = setting(0.1, "a rate", above=0.0, below=1.0)
    kind: str = setting("a", "a kind", choices=("a", "b"))
    flag: bool = setting(False, "a flag")
    scale: float = setting(1.0, "a scale", minimum=0.0)
    seed: int = 0

    def __post_init__(self):
        check_settings(self)


def snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def finish_a_run(folder, config=None, scores=None):
    with Run(folder, "tests.recipe", config or Config()) as run:
        run.write_json("scores.json", scores or {"accuracy": 0.5})
        run.write_text("model.txt", "weights")
    return folder


def test_a_finished_run_says_so_and_records_its_configuration(tmp_path):
    folder = finish_a_run(tmp_path / "run")
    state = read_run(folder)
    assert state["status"] == "finished" and state["recipe"] == "tests.recipe" and state["error"] is None
    assert state["config"] == dataclasses.asdict(Config())
    assert json.loads((folder / "config.json").read_text()) == dataclasses.asdict(Config())
    assert finished_run(folder)["status"] == "finished"


def test_a_folder_holding_another_run_is_refused_and_left_as_it_was(tmp_path):
    folder = finish_a_run(tmp_path / "run")
    before = snapshot(folder)
    with pytest.raises(FileExistsError, match="holds a finished run of tests.recipe.*--resume.*--replace"):
        with Run(folder, "tests.recipe", Config(steps=5)):
            pytest.fail("the run must not start")
    assert snapshot(folder) == before
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty and holds no kzoo run"):
        Run(tmp_path / "other", "tests.recipe", Config()).__enter__()
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_a_failed_run_says_why_and_only_resumes_with_its_own_configuration(tmp_path):
    folder = tmp_path / "run"
    with pytest.raises(RuntimeError):
        with Run(folder, "tests.recipe", Config()):
            raise RuntimeError("disk on fire")
    state = read_run(folder)
    assert state["status"] == "failed" and state["error"] == "RuntimeError: disk on fire"
    with pytest.raises(ValueError, match="failed run.*disk on fire"):
        finished_run(folder)
    with pytest.raises(FileExistsError, match="--resume"):
        Run(folder, "tests.recipe", Config()).__enter__()
    with pytest.raises(ValueError, match="steps: 3 then, 4 now"):
        Run(folder, "tests.recipe", Config(steps=4), resume=True).__enter__()
    with Run(folder, "tests.recipe", Config(), resume=True) as run:
        assert run.resumed
    state = read_run(folder)
    assert state["status"] == "finished" and len(state["resumed"]) == 1


def test_resume_needs_an_unfinished_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="no kzoo run to resume"):
        Run(tmp_path / "nothing", "tests.recipe", Config(), resume=True).__enter__()
    folder = finish_a_run(tmp_path / "run")
    with pytest.raises(ValueError, match="already finished"):
        Run(folder, "tests.recipe", Config(), resume=True).__enter__()


def test_replace_keeps_the_old_run_until_the_new_one_finishes(tmp_path):
    folder = finish_a_run(tmp_path / "run", scores={"accuracy": 0.5})
    before = snapshot(folder)
    with pytest.raises(RuntimeError):
        with Run(folder, "tests.recipe", Config(steps=7), replace=True) as run:
            run.write_text("model.txt", "half-trained")
            raise RuntimeError("killed")
    assert snapshot(folder) == before  # the failed replacement put the old run back
    with Run(folder, "tests.recipe", Config(steps=7), replace=True) as run:
        assert not (folder / "model.txt").exists()  # a fresh folder: nothing of the old run mixes in
        run.write_json("scores.json", {"accuracy": 0.9})
    assert json.loads((folder / "scores.json").read_text()) == {"accuracy": 0.9}
    assert read_run(folder)["config"]["steps"] == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing left aside


def test_settings_name_every_bad_value():
    with pytest.raises(ValueError) as error:
        Config(steps=0, rate=1.0, kind="c", flag="yes")
    message = str(error.value)
    for part in ("steps=0 is below its minimum 1 (steps to take)", "rate=1.0 must be below 1.0",
                 "kind='c' is not one of ('a', 'b')", "flag='yes' is not a bool"):
        assert part in message
    assert Config(scale=2).scale == 2.0 and isinstance(Config(scale=2).scale, float)  # an int where a float goes


@pytest.mark.parametrize("config_class, values, message", [
    (TranslationConfig, {"steps_per_epoch": -5}, "steps_per_epoch=-5 is below its minimum 0"),
    (TranslationConfig, {"epochs": 0}, "epochs=0 is below its minimum 1"),
    (TranslationConfig, {"beam_size": 0}, "beam_size=0 is below its minimum 1"),
    (TranslationConfig, {"max_length": 1}, "max_length=1 is below its minimum 4"),
    (TranslationConfig, {"hidden_dim": 250}, "hidden_dim=250 is not divisible by num_heads=4"),
    (TranslationConfig, {"dtype": "float64"}, "dtype='float64' is not one of"),
    (FinetuningConfig, {"batch_size": 0}, "batch_size=0 is below its minimum 1"),
    (FinetuningConfig, {"task": "cola"}, "task='cola' is not one of ('sst2', 'mrpc')"),
    (FinetuningConfig, {"backbone": "a.keras", "checkpoint": "b"}, "give one of them"),
    (FinetuningConfig, {"layer_decay": 0.0}, "layer_decay=0.0 must be above 0.0"),
    (PretrainingConfig, {"steps_per_epoch": -5}, "steps_per_epoch=-5 is below its minimum 1"),
    (PretrainingConfig, {"max_predictions": 200}, "max_predictions=200 must be at most sequence_length - 3"),
])
def test_recipe_configurations_refuse_values_that_would_learn_nothing(config_class, values, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config_class(**values)


RECIPES = ("kzoo.train.translation_recipe", "kzoo.train.bert_pretraining_recipe",
           "kzoo.train.bert_finetuning_recipe")


@pytest.mark.parametrize("module", RECIPES)
def test_help_describes_every_flag_before_tensorflow_is_imported(module):
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", module, "--help"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time")}
    assert not {name for name in imported if name.split(".")[0] in ("tensorflow", "keras", "keras_hub")}
    help_text = " ".join(result.stdout.split())
    assert help_text.startswith(f"usage: python -m {module}")
    assert "--resume" in help_text and "--replace" in help_text and "(default: 1337)" in help_text
    if module == "kzoo.train.bert_finetuning_recipe":
        assert "--task {sst2,mrpc}" in help_text and "--trim-padding, --no-trim-padding" in help_text
        assert "--pooling {pooled,mean}" in help_text


def test_a_bad_flag_value_fails_at_once_with_its_name(tmp_path):
    result = subprocess.run([sys.executable, "-m", "kzoo.train.translation_recipe", "--output", str(tmp_path / "run"),
                             "--steps-per-epoch", "-5"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "steps_per_epoch=-5 is below its minimum 0" in result.stderr
    assert not (tmp_path / "run").exists()


def test_a_preset_sets_the_defaults_and_a_given_flag_still_wins():
    from kzoo.train.run import parse_recipe_arguments, recipe_parser
    from kzoo.train.translation_recipe import MODULE, PRESETS

    def parsed(*argv):
        parser = recipe_parser(MODULE, TranslationConfig, "Train a translator.", presets=PRESETS)
        return config_from_arguments(parse_recipe_arguments(parser, ["--output", "run", *argv]), TranslationConfig)

    assert parsed() == TranslationConfig()
    hour = parsed("--preset", "multi30k_hour")
    assert hour == TranslationConfig.from_preset("multi30k_hour") == TranslationConfig(**PRESETS["multi30k_hour"])
    assert (hour.minutes, hour.beam_size, hour.length_penalty, hour.dtype, hour.dropout, hour.epochs,
            hour.ema_momentum) == (60.0, 4, 0.8, "mixed_bfloat16", 0.2, 40, 0.999)
    assert hour.hidden_dim == TranslationConfig().hidden_dim  # what the preset does not list keeps its default
    # A flag beside the preset wins, wherever it stands on the command line.
    assert parsed("--beam-size", "6", "--preset", "multi30k_hour").beam_size == 6
    assert parsed("--preset", "multi30k_hour", "--beam-size", "6").minutes == 60.0
    assert TranslationConfig.from_preset("multi30k_hour", seed=7).seed == 7
    with pytest.raises(ValueError, match=r"no preset named 'multi30k_day'; the presets are \['multi30k_hour'\]"):
        TranslationConfig.from_preset("multi30k_day")
    with pytest.raises(SystemExit):
        parsed("--preset", "multi30k_day")
    parser = recipe_parser(MODULE, TranslationConfig, "Train a translator.", presets=PRESETS)
    help_text = " ".join(parser.format_help().split())
    assert "--preset {multi30k_hour}" in help_text and "multi30k_hour: minutes=60.0, beam_size=4" in help_text
