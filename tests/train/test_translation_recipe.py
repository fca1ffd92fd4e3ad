"""The translation recipe on a tiny model and a slice of Multi30k: a whole run, a refused rerun, a killed run
resumed, and a replaced run whose checkpoint averaging sees only its own checkpoints."""

import dataclasses
import json

import pytest

from kzoo.data import multi30k
from kzoo.train import translation_recipe
from kzoo.train.run import read_run
from kzoo.train.translation_recipe import TranslationConfig

TINY = TranslationConfig(vocabulary_size=400, encoder_layers=1, decoder_layers=1, hidden_dim=32, num_heads=2,
                         intermediate_dim=64, max_tokens=512, max_length=32, warmup_steps=10, epochs=3,
                         steps_per_epoch=4, average_last=2, patience=10, beam_size=2)


@pytest.fixture(scope="module")
def pairs():
    train, val = multi30k("train"), multi30k("val")
    return (train[0][:400], train[1][:400]), (val[0][:16], val[1][:16])


def run(config, folder, pairs, **options):
    return translation_recipe.train(config, folder, *pairs, test_pairs=(), verbose=0, methods=("greedy",),
                                    **options)


@pytest.fixture(scope="module")
def finished(tmp_path_factory, pairs):
    folder = tmp_path_factory.mktemp("translation") / "run"
    model, tokenizer, results = run(TINY, folder, pairs)
    return folder, model, results


def test_a_run_writes_a_whole_folder(finished):
    folder, model, results = finished
    assert read_run(folder)["status"] == "finished"
    assert results["epochs"] == 3 and results["steps"] == 12 and len(results["val_loss"]) == 3
    assert json.loads((folder / "scores.json").read_text()) == results
    assert json.loads((folder / "config.json").read_text()) == dataclasses.asdict(TINY)
    names = {p.name for p in folder.iterdir()}
    assert {"model.keras", "tokenizer.model", "history.csv", "val_greedy.de", "checkpoints", "logs"} <= names
    assert "backup" not in names  # deleted once training completed
    assert not [name for name in names if name.startswith(".")]  # no temporaries left
    assert [p.name for p in (folder / "checkpoints").iterdir()] != []


def test_rerunning_into_a_finished_run_is_refused_before_any_work(finished, pairs):
    folder, _, _ = finished
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    with pytest.raises(FileExistsError, match="holds a finished run"):
        run(dataclasses.replace(TINY, epochs=2), folder, pairs)
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == before


def test_a_replaced_run_averages_only_its_own_checkpoints(finished, pairs, tmp_path):
    folder, _, _ = finished
    copy = tmp_path / "run"
    copy.mkdir()
    for path in folder.rglob("*"):
        target = copy / path.relative_to(folder)
        target.mkdir(exist_ok=True) if path.is_dir() else target.write_bytes(path.read_bytes())
    _, _, results = run(dataclasses.replace(TINY, epochs=1), copy, pairs, replace=True)
    assert results["epochs"] == 1
    assert [p.name for p in (copy / "checkpoints").iterdir()] == ["epoch_001.weights.h5"]


class Crash(Exception):
    pass


def test_a_killed_run_resumes_from_its_backup_to_the_planned_steps(pairs, tmp_path, monkeypatch):
    import keras

    from kzoo.train.run import Run

    class CrashAfterTheSecondEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise Crash("killed")

    standard = Run.callbacks
    monkeypatch.setattr(Run, "callbacks", lambda self, **kw: standard(self, **kw) + [CrashAfterTheSecondEpoch()])
    with pytest.raises(Crash):
        run(TINY, tmp_path / "run", pairs)
    assert read_run(tmp_path / "run")["status"] == "failed"
    monkeypatch.setattr(Run, "callbacks", standard)
    with pytest.raises(FileExistsError, match="failed run"):
        run(TINY, tmp_path / "run", pairs)
    _, _, results = run(TINY, tmp_path / "run", pairs, resume=True)
    assert results["steps"] == 12 and results["epochs"] == 3
    assert read_run(tmp_path / "run")["status"] == "finished"


def test_the_linear_schedule_falls_to_zero_at_the_planned_steps(pairs, tmp_path):
    config = dataclasses.replace(TINY, schedule="linear_to_budget", warmup_steps=2, epochs=2, average_last=1)
    model, _, results = run(config, tmp_path / "run", pairs)
    peak = translation_recipe.peak_learning_rate(config)
    assert results["steps"] == 8
    # Step 7 of 8 (from 0) ran at peak · (1 - 7/8); the 55-minute budget has hardly begun.
    assert float(model.optimizer.learning_rate) == pytest.approx(peak / 8, rel=1e-3)


def test_with_a_moving_average_the_final_model_is_its_last_epoch_s_average(pairs, tmp_path):
    import numpy as np

    model, _, results = run(dataclasses.replace(TINY, ema_momentum=0.9, epochs=2), tmp_path / "run", pairs)
    folder = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == [
        "epoch_001.weights.h5", "epoch_002.weights.h5",
        "moving_average_001.weights.h5", "moving_average_002.weights.h5"]
    final = [w.numpy() for w in model.weights]
    model.load_weights(folder / "moving_average_002.weights.h5")
    assert all(np.array_equal(a, w.numpy()) for a, w in zip(final, model.weights))
    model.load_weights(folder / "epoch_002.weights.h5")  # the weights themselves, which training followed
    assert not all(np.array_equal(a, w.numpy()) for a, w in zip(final, model.weights))
    assert results["steps"] == 8
