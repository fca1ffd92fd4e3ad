"""Does pretraining help? Fine-tune the same small BERT from random initialisation and from a pretrained backbone.

For each GLUE task, both arms run `kzoo.train.bert_finetuning_recipe` with the same configuration, the same number
of steps and the same seed; the only difference is where the backbone's weights come from. The pretrained backbone
is what `python -m kzoo.train.bert_pretraining_recipe` writes (backbone.keras); the random one is built by the same
code with the same size. The section `bert-ablation` of RESULTS.md gets the table, with the pretraining run's own
summary (read from its scores.json and config.json) and the commands.

Usage:
    .venv/bin/python benchmarks/bert_ablation.py --pretrained runs/bert_wikitext2 --output benchmarks/RESULTS.md
"""

import argparse
import dataclasses
import json
import pathlib

from results_file import environment, replace_section

from kzoo.train.bert_finetuning_recipe import FinetuningConfig, train

DEFAULT_STEPS = {"sst2": 1200, "mrpc": 600}


def run_arms(pretrained_dir, runs_dir, steps, reuse=False):
    """Fine-tune both arms on each task; returns {task: {arm: results}}.

    With `reuse`, an arm whose run folder already holds a scores.json for the same configuration is read back
    instead of trained again (e.g. the random arm, which does not depend on the pretrained backbone).
    """
    results = {}
    for task, task_steps in steps.items():
        results[task] = {}
        for arm, backbone in (("random", ""), ("pretrained", str(pretrained_dir / "backbone.keras"))):
            config = FinetuningConfig(task=task, backbone=backbone, train_steps=task_steps)
            run_dir = runs_dir / f"{task}_{arm}"
            if reuse and (run_dir / "scores.json").is_file() and _same_run(run_dir, config):
                print(f"reusing {run_dir}", flush=True)
                results[task][arm] = json.loads((run_dir / "scores.json").read_text())
            else:
                _, results[task][arm] = train(config, run_dir, verbose=2)
    return results


def _same_run(run_dir, config):
    """Whether the run in `run_dir` had `config`, apart from where the vocabulary file lives."""
    saved = json.loads((run_dir / "config.json").read_text())
    defaults = dataclasses.asdict(FinetuningConfig())  # for fields added since that run was made
    ours = dataclasses.asdict(config)
    return all(saved.get(key, defaults[key]) == value for key, value in ours.items() if key != "vocabulary")


def pretraining_summary(pretrained_dir, pretraining, config):
    """Where the pretrained backbone came from: the CPU recipe, or benchmarks/bert_pretraining_accelerator.py."""
    scores = (f"at the end its validation masked-LM accuracy was {100 * pretraining['val_mlm_accuracy']:.1f}% (loss "
              f"{pretraining['val_mlm_loss']:.2f}) and next-sentence accuracy "
              f"{100 * pretraining['val_nsp_accuracy']:.1f}%.")
    size = (f"a {config['preset']}-sized BERT (WordPiece vocabulary of 8,192 learned from WikiText-2), "
            f"{pretraining['steps']:,} steps of {config['batch_size']} × {config['sequence_length']} tokens")
    if "backend" in pretraining:  # pretrained on an accelerator through Keras's JAX backend
        return (
            f"Pretrained backbone: `{pretrained_dir}/backbone.keras`, made by "
            "`benchmarks/bert_pretraining_accelerator.py` "
            f"(export here, `train --batch-size {config['batch_size']} --learning-rate {config['learning_rate']:g} "
            f"--warmup-fraction {config['warmup_fraction']:g}` on one {', '.join(pretraining['device'])} GPU "
            f"(an NVIDIA H200) with Keras's {pretraining['backend']} backend, `import` here; see that script's "
            f"docstring): {size} in {pretraining['train_minutes']} minutes, the weights of its best validation "
            f"epoch, evaluated again here with TensorFlow; {scores}"
        )
    return (
        f"Pretrained backbone: `{pretrained_dir}/backbone.keras`, made by "
        f"`.venv/bin/python -m kzoo.train.bert_pretraining_recipe --train-steps {config['train_steps']} "
        f"--steps-per-epoch {config['steps_per_epoch']} --minutes {config['minutes']:g} "
        + (f"--initial-weights {config['initial_weights']} " if config.get("initial_weights") else "")
        + f"--output {pretrained_dir}`: {size} in {pretraining['train_minutes']} minutes on this CPU; {scores}"
    )


def report(results, pretrained_dir, runs_dir, steps, env):
    pretraining = json.loads((pretrained_dir / "scores.json").read_text())
    pretraining_config = json.loads((pretrained_dir / "config.json").read_text())
    rows = []
    for task, arms in results.items():
        random, pretrained = arms["random"]["dev"], arms["pretrained"]["dev"]
        for arm, scores in arms.items():
            rows.append(
                f"| {task} | {arm} | {scores['steps']} | {scores['train_minutes']} | "
                f"{scores['dev']['accuracy'] * 100:.2f} | {scores['dev']['f1'] * 100:.2f} | "
                f"{', '.join(f'{100 * a:.1f}' for a in scores['dev_accuracy_per_epoch'])} |"
            )
        rows.append(
            f"| {task} | **pretrained − random** | | | **{(pretrained['accuracy'] - random['accuracy']) * 100:+.2f}** "
            f"| **{(pretrained['f1'] - random['f1']) * 100:+.2f}** | |"
        )
    commands = "\n".join(
        f"    .venv/bin/python -m kzoo.train.bert_finetuning_recipe --task {task} --train-steps {task_steps} "
        f"--output {runs_dir}/{task}_{arm}"
        f"{' --backbone ' + str(pretrained_dir / 'backbone.keras') if arm == 'pretrained' else ''}"
        for task, task_steps in steps.items()
        for arm in ("random", "pretrained")
    )
    return "\n".join([
        "## BERT ablation: fine-tuning from random initialisation vs from WikiText-2 pretraining",
        "",
        f"Command: `{env['command']}`  ",
        f"Date: {env['date']}  ",
        f"CPU: {env['cpu']}  ",
        f"Versions: {env['versions']}",
        "",
        pretraining_summary(pretrained_dir, pretraining, pretraining_config),
        "",
        "Both arms of a task share everything else: the recipe's defaults (AdamW at a peak of 1e-4, 10% warm-up then "
        "linear decay, weight decay 0.01, batch 32, dropout 0.1, SST-2 at 64 tokens and MRPC at 128), the number of "
        "steps, the seed and so the order of the training examples. Dev accuracy and F1 of the positive class "
        "(positive review / paraphrase) on GLUE's dev splits (SST-2 872 sentences, MRPC 408 pairs).",
        "",
        "| task | backbone | steps | minutes | dev accuracy % | dev F1 % | dev accuracy per epoch % |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "The same, one run at a time:",
        "",
        commands,
        "",
    ])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pretrained", required=True, help="the pretraining run folder (backbone.keras, scores.json)")
    parser.add_argument("--runs", default="runs/bert_ablation", help="where the fine-tuning runs go")
    parser.add_argument("--sst2-steps", type=int, default=DEFAULT_STEPS["sst2"])
    parser.add_argument("--mrpc-steps", type=int, default=DEFAULT_STEPS["mrpc"])
    parser.add_argument("--reuse", action="store_true", help="read back finished runs in --runs with the same config")
    parser.add_argument("--output", help="write the section to this RESULTS.md")
    args = parser.parse_args(argv)
    pretrained_dir, runs_dir = pathlib.Path(args.pretrained), pathlib.Path(args.runs)
    if not (pretrained_dir / "backbone.keras").is_file():
        parser.error(f"{pretrained_dir}/backbone.keras does not exist: run kzoo.train.bert_pretraining_recipe first.")
    steps = {"sst2": args.sst2_steps, "mrpc": args.mrpc_steps}
    env = environment()
    text = report(run_arms(pretrained_dir, runs_dir, steps, args.reuse), pretrained_dir, runs_dir, steps, env)
    print(text)
    if args.output:
        replace_section(args.output, "bert-ablation", text)


if __name__ == "__main__":
    main()
