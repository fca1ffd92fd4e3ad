"""benchmarks/translation_decoding_study.py, translation_training_study.py and ctranslate2_alone.py run end to end on
a few sentences."""

import os
import subprocess
import sys

import pytest

from tests.train.worker_processes import REPOSITORY


def run(script, *args):
    completed = subprocess.run([sys.executable, f"benchmarks/{script}", *args], cwd=REPOSITORY,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True, text=True,
                               timeout=600)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return [line for line in completed.stdout.splitlines() if line.startswith("| ") and "---" not in line]


@pytest.mark.slow  # about a minute: fifteen decodings of the shipped translator; `make test-slow` runs it
def test_the_decoding_study_scores_every_setting_of_its_grid_on_val():
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    from translation_decoding_study import GRID

    rows = run("translation_decoding_study.py", "--sentences", "24")
    scored = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows if not row.startswith("| decoding")]
    assert [cells[0] for cells in scored[: len(GRID)]] == [
        "greedy" if beam == 1 else f"beam {beam}, α {alpha}" + (", early stopping" if early else "")
        for beam, alpha, early in GRID]
    for cells in scored[: len(GRID)]:
        assert 15 < float(cells[1]) < 70 and 40 < float(cells[2]) < 90  # BLEU and chrF of the shipped weights


@pytest.mark.slow  # about a minute: fifteen decodings of the version kept for servers without XLA, on 8 sentences
def test_the_decoding_study_of_another_translator_writes_a_section_of_its_own(tmp_path):
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    from translation_decoding_study import GRID, SECTION

    results = tmp_path / "RESULTS.md"
    results.write_text(f"<!-- {SECTION}:start -->\nthe shipped weights' rows\n<!-- {SECTION}:end -->\n")
    version = REPOSITORY / "saved_models" / "transformer_multi30k_en_de" / "4"
    rows = run("translation_decoding_study.py", "--translator", str(version), "--sentences", "8", "--output",
               str(results))
    assert len([row for row in rows if row.startswith(("| greedy", "| beam"))]) >= len(GRID)
    text = results.read_text()
    assert "the shipped weights' rows" in text  # the shipped section is kept
    name = f"{SECTION}-transformer_multi30k_en_de-4"
    own = text[text.index(f"<!-- {name}:start -->"): text.index(f"<!-- {name}:end -->")]
    assert "The weights of transformer_multi30k_en_de-4 (beam 4, α 0.6 as its setting)" in own
    assert "| beam 5, α 1.2 |" in own


@pytest.mark.slow
def test_ctranslate2_alone_times_float32_and_int8():
    pytest.importorskip("ctranslate2")
    rows = run("ctranslate2_alone.py", "--sentences", "16", "--rounds", "1", "--singles", "2")
    timed = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows if row.startswith("| CTranslate2")]
    assert [cells[0] for cells in timed[:2]] == ["CTranslate2 float32, alone", "CTranslate2 int8, alone"]
    for cells in timed[:2]:
        assert float(cells[1]) > 0 and float(cells[3]) > 0  # sentences/s, latency


@pytest.mark.slow  # a tiny recipe run, then its study rows
def test_the_training_study_scores_a_run_at_each_budget(tmp_path):
    from kzoo.data import multi30k
    from kzoo.train import translation_recipe
    from kzoo.train.translation_recipe import TranslationConfig

    config = TranslationConfig(vocabulary_size=400, encoder_layers=1, decoder_layers=1, hidden_dim=32, num_heads=2,
                               intermediate_dim=64, max_tokens=512, max_length=32, epochs=3, steps_per_epoch=2,
                               average_last=2, beam_size=2, dropout=0.2, ema_momentum=0.9)
    (english, german), val = multi30k("train"), multi30k("val")
    translation_recipe.train(config, tmp_path / "tiny", (english[:300], german[:300]), (val[0][:8], val[1][:8]),
                             test_pairs=(), verbose=0, methods=("greedy",))
    rows = run("translation_training_study.py", str(tmp_path / "tiny"), "--budgets", "0.0001", "55", "1000",
               "--epoch-budgets", "1", "4", "--average", "2", "--sentences", "8")
    table = rows[next(i for i, row in enumerate(rows) if row.startswith("| run |")) + 1:]  # not the progress lines
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in table if row.startswith("| tiny")]
    assert [row[2] for row in cells] == ["0.0001", "55", "1000", "1 epochs", "4 epochs"]
    assert cells[0][3] == cells[4][3] == "no such epoch in the run"
    assert cells[2][3] == "beyond the run's own 55-minute budget"  # the recipe's default minutes
    del cells[2]
    assert cells[2][3].startswith("1 (") and cells[2][4] == "1"
    assert "dropout=0.2" in cells[1][1] and "hidden_dim=32" in cells[1][1]
    assert cells[1][3].startswith("3 (") and cells[1][4] == "2"  # every epoch inside, the last two averaged
    bleu = float(cells[1][5].split()[0])
    assert 0 <= bleu <= 100
    # The same run scored on its moving averages: the last epoch's inside each budget, not an average of several.
    rows = run("translation_training_study.py", str(tmp_path / "tiny"), "--budgets", "55", "--epoch-budgets", "1",
               "--moving-average", "--sentences", "8")
    table = rows[next(i for i, row in enumerate(rows) if row.startswith("| run |")) + 1:]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in table if row.startswith("| tiny")]
    assert [(row[2], row[3].split()[0], row[4]) for row in cells] == [
        ("55", "3", "moving average (0.9)"), ("1 epochs", "1", "moving average (0.9)")]
    # Several epochs' moving averages averaged (a longer horizon), as many as the budget holds.
    rows = run("translation_training_study.py", str(tmp_path / "tiny"), "--budgets", "55", "--epoch-budgets", "1",
               "--moving-average", "--average", "2", "--sentences", "8")
    table = rows[next(i for i, row in enumerate(rows) if row.startswith("| run |")) + 1:]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in table if row.startswith("| tiny")]
    assert [(row[2], row[3].split()[0], row[4]) for row in cells] == [
        ("55", "3", "last 2 moving averages (0.9)"), ("1 epochs", "1", "moving average (0.9)")]


def test_the_training_study_keeps_earlier_rows_unless_scored_again(tmp_path):
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    from translation_training_study import SECTION, earlier_rows

    def row(run, budget, averaged, bleu):
        return f"| {run} | dropout=0.3 | {budget} | 12 (28.7 min) | {averaged} | {bleu} (0.00) | 58.22 |"

    old = [row("s0", "30", 5, "37.59"), row("s1", "30", 5, "34.58"), row("s1", "60", 5, "39.07")]
    results = tmp_path / "RESULTS.md"
    results.write_text("\n".join([f"<!-- {SECTION}:start -->", "| run | changed from the defaults | budget (min) | "
                                  "epochs inside | averaged | val BLEU (lowercased) | val chrF |", "| --- |", *old,
                                  f"<!-- {SECTION}:end -->"]))
    new = [row("s1", "60", 5, "39.10"), row("s1", "60", 10, "39.20"), row("s2", "30", 5, "38.00")]
    assert earlier_rows(results, new) == old[:2]  # s1 at 60 minutes, 5 averaged, is the one scored again
    assert earlier_rows(tmp_path / "absent.md", new) == []


def test_the_training_study_keeps_the_earlier_scorings_header_lines(tmp_path):
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    from translation_training_study import SECTION, earlier_scorings

    first = "2026-12-05T09:15:13+00:00 · `translation_training_study.py runs/s0 --budgets 30` · AMD EPYC"
    second = "2026-12-06T02:26:00+00:00 · `translation_training_study.py runs/s6 --budgets 30 60` · AMD EPYC"
    results = tmp_path / "RESULTS.md"
    results.write_text("\n".join([f"<!-- {SECTION}:start -->", "## Translation study", "", first, "", second, "",
                                  "Runs of `python -m kzoo.train.translation_recipe` on the 2-core machine.", "",
                                  "| run |", f"<!-- {SECTION}:end -->"]))
    assert earlier_scorings(results) == [first, second]
    results.write_text(f"<!-- {SECTION}:start -->\n## Translation study\n\n{first}\n<!-- {SECTION}:end -->")
    assert earlier_scorings(results) == []  # no description line: not a section this script wrote
    assert earlier_scorings(tmp_path / "absent.md") == []


@pytest.mark.slow  # about half a minute: a tiny model, two epochs of two steps
def test_the_step_time_probe_times_the_recipes_model_on_its_batches():
    config = ('{"vocabulary_size": 400, "encoder_layers": 1, "decoder_layers": 1, "hidden_dim": 32, "num_heads": 2, '
              '"intermediate_dim": 64, "max_tokens": 512, "max_length": 32}')
    completed = subprocess.run([sys.executable, "benchmarks/translation_step_time.py", "--config", config, "--steps",
                                "2", "--epochs", "3", "--train-pairs", "300", "--jit-compile", "off"], cwd=REPOSITORY,
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    line = next(line for line in completed.stdout.splitlines() if line.startswith("config "))
    assert "jit_compile off (False)" in line and "ms a step per epoch [" in line
    per_epoch = [int(ms) for ms in line.split("per epoch [")[1].split("]")[0].split(", ")]
    assert len(per_epoch) == 2 and all(ms > 0 for ms in per_epoch)  # the two epochs after the first


def test_the_step_time_probe_refuses_a_single_epoch_before_any_work():
    probe = ("import sys; sys.path.insert(0, 'benchmarks'); import translation_step_time\n"
             "try:\n    translation_step_time.main(['--epochs', '1'])\n"
             "except SystemExit as exit:\n    print(exit.code, 'tensorflow' in sys.modules)")
    completed = subprocess.run([sys.executable, "-c", probe], cwd=REPOSITORY, capture_output=True, text=True,
                               timeout=60)
    assert completed.stdout.split() == ["2", "False"]  # refused before TensorFlow was imported
    assert "--steps 40 --epochs 1: at least one step and two epochs are needed" in completed.stderr


@pytest.mark.slow  # about half a minute: one shipped version loaded twice, 16 sentences each
def test_a_version_compared_with_itself_differs_by_nothing_in_every_resample(tmp_path):
    results = tmp_path / "RESULTS.md"
    printed = run("translation_versions_compared.py", "saved_models/transformer_multi30k_en_de/11",
                  "saved_models/transformer_multi30k_en_de/11", "--sentences", "8", "--resamples", "50",
                  "--output", str(results))
    written = [line for line in results.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    assert written[0].startswith("| split") and written[1:] == printed  # the rows, as scored, in the section
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in printed]
    assert [row[0] for row in cells] == ["val (8)", "test_2016_flickr (8)"]
    for split, a, b, difference, interval, not_ahead in cells:
        assert a == b and difference == "+0.00" and interval == "+0.00 to +0.00" and not_ahead == "1.000"


def test_the_version_comparison_refuses_a_model_folder_before_any_work():
    folder = "saved_models/transformer_multi30k_en_de"
    completed = subprocess.run([sys.executable, "benchmarks/translation_versions_compared.py", folder, f"{folder}/11"],
                               cwd=REPOSITORY, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert ("saved_models/transformer_multi30k_en_de is not a SavedModel version folder (no saved_model.pb): pass a "
            "numbered version") in " ".join(completed.stderr.split())
