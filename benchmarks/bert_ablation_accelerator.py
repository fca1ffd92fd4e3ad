"""The BERT ablation with several seeds, fine-tuned on a borrowed accelerator that has no TensorFlow.

`benchmarks/bert_ablation.py` fine-tunes each arm once on this CPU (about 8 minutes a run). One seed cannot tell a
1-point difference from noise on SST-2's 872 or MRPC's 408 dev examples, so this script runs the same fine-tuning
for several seeds on a GPU, with Keras's JAX backend, in three steps:

1. `export` (here, TensorFlow): the GLUE splits through kzoo's own `preprocessed_dataset` with the pretraining
   vocabulary (SST-2 at 64 tokens, MRPC at 128, as the recipe), and the pretrained backbone's weights, as .npz
   files small enough to travel (the weights as float16: the pretrained start is rounded to 3 significant digits).
2. `train` (on the accelerator, `KERAS_BACKEND=jax`): for every task, seed and arm, `kzoo.models.BertClassifier` on
   a `bert_mini`-sized `Bert`, built and compiled as `kzoo.train.bert_finetuning_recipe` builds it (AdamW at a peak
   of 1e-4, weight decay 0.01, epsilon 1e-6, 10% warm-up then linear decay, batch 32, dropout 0.1), trained for the
   recipe's number of steps, dev accuracy and F1 at the end. The random arm's weights come from the seed; the
   pretrained arm's from the export, with a head initialised from the seed. Both arms of a seed see the same
   example order.
3. `report` (anywhere): the per-seed table, means and standard deviations, into RESULTS.md.

Usage:
    .venv/bin/python benchmarks/bert_ablation_accelerator.py export \\
        --backbone runs/bert_wikitext2_h200/backbone.keras \\
        --output glue_tokens/
    KERAS_BACKEND=jax python3 benchmarks/bert_ablation_accelerator.py train --data glue_tokens/ --output $OUT --seeds 5
    .venv/bin/python benchmarks/bert_ablation_accelerator.py report --results OUT/ablation_runs.json \\
        --output benchmarks/RESULTS.md
"""

import argparse
import json
import pathlib
import statistics
import sys
import time

import keras  # set KERAS_BACKEND before this runs: the train step uses "jax" where TensorFlow is absent
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


STEPS = {"sst2": 1200, "mrpc": 600}  # benchmarks/bert_ablation.py's budget
SEQUENCE_LENGTHS = {"sst2": 64, "mrpc": 128}


# === 1. export (TensorFlow) ===


def export(backbone_path, output):
    from kzoo.data.glue import glue
    from kzoo.text.bert_preprocessor import BertPreprocessor
    from kzoo.text.classification_batches import preprocessed_dataset
    from kzoo.train.bert_finetuning_recipe import FinetuningConfig

    output = pathlib.Path(output)
    output.mkdir(parents=True, exist_ok=True)
    for task, length in SEQUENCE_LENGTHS.items():
        preprocessor = BertPreprocessor(FinetuningConfig().vocabulary, sequence_length=length)
        arrays = {}
        for split in ("train", "dev"):
            data = glue(task, split)
            batches = preprocessed_dataset(data.texts, data.labels, preprocessor, 512, second_texts=data.second_texts,
                                           trim_padding=False)
            features = [(f["token_ids"].numpy(), f["segment_ids"].numpy(), y.numpy()) for f, y in batches]
            arrays[f"{split}_token_ids"] = np.concatenate([f[0] for f in features]).astype(np.uint16)
            arrays[f"{split}_segment_ids"] = np.concatenate([f[1] for f in features]).astype(np.uint8)
            arrays[f"{split}_labels"] = np.concatenate([f[2] for f in features]).astype(np.uint8)
        np.savez_compressed(output / f"{task}.npz", **arrays)
        print(task, {k: v.shape for k, v in arrays.items()}, flush=True)
    backbone = keras.saving.load_model(backbone_path)
    np.savez_compressed(output / "backbone_float16.npz",
                        **{f"w{i:04d}": w.astype(np.float16) for i, w in enumerate(backbone.get_weights())})
    config = {name: getattr(backbone, name) for name in ("vocabulary_size", "num_layers", "hidden_dim", "num_heads",
                                                         "intermediate_dim", "max_sequence_length", "dropout")}
    (output / "backbone_config.json").write_text(json.dumps({**config, "source": str(backbone_path)}, indent=2))


# === 2. train (any Keras backend) ===


def features(arrays, split, rows=slice(None)):
    token_ids = arrays[f"{split}_token_ids"][rows].astype(np.int32)
    return {"token_ids": token_ids, "segment_ids": arrays[f"{split}_segment_ids"][rows].astype(np.int32),
            "padding_mask": (token_ids != 0).astype(np.int32)}


def train(data, output, seeds, minutes, steps_fraction=1.0):
    from kzoo import models
    from kzoo.metrics import SparseF1Score
    from kzoo.train import schedules

    data, output = pathlib.Path(data), pathlib.Path(output)
    output.mkdir(parents=True, exist_ok=True)
    config = json.loads((data / "backbone_config.json").read_text())
    sizes = {k: v for k, v in config.items() if k != "source"}
    stored = np.load(data / "backbone_float16.npz")
    pretrained = [stored[name].astype(np.float32) for name in sorted(stored)]
    started, runs = time.monotonic(), []

    def fresh_classifier(seed):
        keras.utils.set_random_seed(seed)
        return models.BertClassifier(models.Bert(**sizes), num_classes=2, dropout=sizes["dropout"])

    for task, steps in STEPS.items():
        steps = max(1, int(steps * steps_fraction))  # < 1 only to try the script out
        arrays = dict(np.load(data / f"{task}.npz"))
        examples = len(arrays["train_labels"])
        # One compiled model per task; every run loads its own starting weights and a zeroed optimizer into it.
        model = fresh_classifier(0)
        schedule = schedules.WarmupLinearDecay(1e-4, steps, int(0.1 * steps))
        model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01, epsilon=1e-6),
                      metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
        model.optimizer.build(model.trainable_variables)
        for seed in range(seeds):
            order = np.concatenate([np.random.default_rng([seed, epoch]).permutation(examples)
                                    for epoch in range(-(-steps * 32 // examples))])[: steps * 32]
            x, y = features(arrays, "train", order), arrays["train_labels"][order].astype(np.int32)
            for arm in ("random", "pretrained"):
                if time.monotonic() - started > minutes * 60:
                    print(f"time budget spent: stopping before {task} seed {seed} {arm}", flush=True)
                    return _write(output, runs)
                start = fresh_classifier(1000 + seed)  # the head (and the random arm's backbone) from the seed
                if arm == "pretrained":
                    start.backbone.set_weights(pretrained)
                model.set_weights(start.get_weights())
                for variable in model.optimizer.variables:  # step count, moments: a new optimizer
                    variable.assign(np.zeros(variable.shape, variable.dtype))
                keras.utils.set_random_seed(2000 + seed)  # dropout
                run_started = time.monotonic()
                model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
                logits = model.predict(features(arrays, "dev"), batch_size=256, verbose=0)
                labels = arrays["dev_labels"].astype(np.int32)
                f1 = SparseF1Score()
                f1.update_state(labels, logits)
                runs.append({"task": task, "seed": seed, "arm": arm, "steps": steps,
                             "seconds": round(time.monotonic() - run_started, 1),
                             "accuracy": float(np.mean(np.argmax(logits, -1) == labels)), "f1": float(f1.result())})
                print(json.dumps(runs[-1]), flush=True)
                _write(output, runs)
    return _write(output, runs)


def _write(output, runs):
    path = pathlib.Path(output) / "ablation_runs.json"
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({"backend": keras.backend.backend(), "runs": runs}, indent=1) + "\n")
    partial.replace(path)
    return runs


# === 3. report ===


def report(results, backbone_config):
    runs = json.loads(pathlib.Path(results).read_text())["runs"]
    config = json.loads(pathlib.Path(backbone_config).read_text())
    lines = [
        "## BERT ablation over seeds (fine-tuned on an accelerator)",
        "",
        "Commands: `.venv/bin/python benchmarks/bert_ablation_accelerator.py export --backbone "
        f"{config['source']} --output glue_tokens/` here, `train --data glue_tokens/ --seeds N` on one NVIDIA H200 "
        "with Keras's JAX backend, `report` here (see the script's docstring).",
        "",
        "The same fine-tuning as the single-seed CPU table above (bert_finetuning_recipe's defaults: AdamW, peak 1e-4, "
        "10% warm-up, linear decay, batch 32, dropout 0.1; SST-2 1,200 steps at 64 tokens, MRPC 600 steps at 128), "
        "repeated over seeds. A seed fixes the example order (shared by both arms), the classifier head's "
        "initialisation, the random arm's backbone and dropout. The pretrained arm starts from the backbone above "
        "(its weights rounded to float16 to travel). Dev accuracy and F1 (%) after the last step.",
        "",
        "| task | seed | random acc | pretrained acc | random F1 | pretrained F1 |",
        "|---|---|---|---|---|---|",
    ]
    summary = []
    for task in STEPS:
        by_seed = {}
        for run in runs:
            if run["task"] == task:
                by_seed.setdefault(run["seed"], {})[run["arm"]] = run
        complete = {s: arms for s, arms in sorted(by_seed.items()) if len(arms) == 2}
        for seed, arms in complete.items():
            lines.append(f"| {task} | {seed} | {100 * arms['random']['accuracy']:.2f} | "
                         f"{100 * arms['pretrained']['accuracy']:.2f} | {100 * arms['random']['f1']:.2f} | "
                         f"{100 * arms['pretrained']['f1']:.2f} |")
        if len(complete) >= 2:
            stats = {}
            for metric in ("accuracy", "f1"):
                for arm in ("random", "pretrained"):
                    values = [100 * arms[arm][metric] for arms in complete.values()]
                    stats[arm, metric] = (statistics.mean(values), statistics.stdev(values))
                differences = [100 * (arms["pretrained"][metric] - arms["random"][metric])
                               for arms in complete.values()]
                stats["difference", metric] = (statistics.mean(differences), statistics.stdev(differences))
            n = len(complete)
            wins = sum(arms["pretrained"]["accuracy"] > arms["random"]["accuracy"] for arms in complete.values())
            summary.append(
                f"- {task} ({n} seeds): accuracy random {stats['random', 'accuracy'][0]:.2f} ± "
                f"{stats['random', 'accuracy'][1]:.2f}, pretrained {stats['pretrained', 'accuracy'][0]:.2f} ± "
                f"{stats['pretrained', 'accuracy'][1]:.2f}; pretrained − random "
                f"{stats['difference', 'accuracy'][0]:+.2f} "
                f"± {stats['difference', 'accuracy'][1] / n ** 0.5:.2f} (mean ± standard error over paired seeds). "
                f"F1 random {stats['random', 'f1'][0]:.2f}, pretrained {stats['pretrained', 'f1'][0]:.2f}, difference "
                f"{stats['difference', 'f1'][0]:+.2f} ± {stats['difference', 'f1'][1] / n ** 0.5:.2f}. The pretrained "
                f"arm has the higher accuracy in {wins} of the {n} seeds."
            )
    notes = [
        "",
        "Every run: [bert_ablation_seeds.json](bert_ablation_seeds.json); the pretraining run, epoch by epoch: "
        "[bert_pretraining_h200.log](bert_pretraining_h200.log). Reruns of a seed give the same numbers except, "
        "rarely, one dev example (GPU reductions are not bit-deterministic): the SST-2 seeds 0–4 of two calls "
        "agreed on 9 of 10 runs, the tenth by 0.11 points.",
    ]
    return "\n".join(lines + [""] + summary + notes + [""])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("export")
    p.add_argument("--backbone", required=True)
    p.add_argument("--output", required=True)
    p = commands.add_parser("train")
    p.add_argument("--data", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--minutes", type=float, default=4.0)
    p.add_argument("--steps-fraction", type=float, default=1.0, help="< 1 to try the script out quickly")
    p = commands.add_parser("report")
    p.add_argument("--results", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--output")
    args = parser.parse_args(argv)
    if args.command == "export":
        export(args.backbone, args.output)
    elif args.command == "train":
        train(args.data, args.output, args.seeds, args.minutes, args.steps_fraction)
    else:
        text = report(args.results, pathlib.Path(args.data) / "backbone_config.json")
        print(text)
        if args.output:
            from results_file import replace_section

            replace_section(args.output, "bert-ablation-seeds", text)


if __name__ == "__main__":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    main()
