"""Translation serving, text in → text out: kzoo's exported translator against CTranslate2 on the same weights.

The shipped translator (saved_models/transformer_multi30k_en_de, its newest version: 3+3 post-LN blocks, d_model
256, 8,000 shared SentencePiece pieces, with its own beam size and length penalty) served several ways, in one run:
- kzoo SavedModel, TF Python: `tf.saved_model.load` and its `serving_default` (tokenizing, beam search and
  detokenizing in the graph), with 1 intra-op and 2 inter-op threads, as README tells TF Serving to run it
  (`--tensorflow_intra_op_parallelism=1 --tensorflow_inter_op_parallelism=2`). So that the speed settings' gain
  is read in the same run, the newest's weights are also exported for the run without them (no XLA, one lane:
  `jit_max_sentences=0, lanes=1`), and the version before the newest is timed too, with its own weights and beam
  settings (which its row names), so that a new model's speed is read beside the one it replaces.
- kzoo SavedModel quantized, TF Python: `kzoo.export.export_translator(..., quantization="int8")` of the same
  weights (int8 matrices), twice: with float32 matmuls (`compute_dtype="float32"`) and with bfloat16 matmuls
  (`compute_dtype="bfloat16"`), each loaded as the float32 one; which of the two is faster depends on the CPU.
- kzoo SavedModel, C API: `kzoo.serving.ContractLoader`, TF Serving's loading path (TensorFlow's C API, in its own
  process) answering TF Serving REST bodies three ways: with README's thread flags for throughput (1 intra-op
  thread, one inter-op thread per core), with README's flags for single-sentence latency (an intra-op and an
  inter-op thread per core), and with TF Serving's default threads (0 and 0: TensorFlow chooses); and the first
  two again with `TF_ENABLE_ONEDNN_OPTS=0` in the loader's environment (TensorFlow's own CPU kernels instead of its
  oneDNN graph rewrites, as `docker run -e TF_ENABLE_ONEDNN_OPTS=0` would set it for TF Serving).
- CTranslate2 float32 and int8: `kzoo.export.export_ctranslate2` of the same weights (int8 with
  `quantization="int8"`), run by `ctranslate2.Translator` with 2 intra-op threads, through
  `kzoo.export.ctranslate2_export.translate_ctranslate2` (the kzoo tokenizer in Python, the translator's beam size,
  CTranslate2's length penalty that matches its GNMT one, `ctranslate2_length_penalty`, kzoo's output limits),
  each model in a process of its own (ctranslate2_worker.py: two CTranslate2 models in one process slow the
  float32 one by about a third).
Every contender first translates the warm-up requests of every timed version (assets.extra/
tf_serving_warmup_requests, which TF Serving and the C API loader replay at load), so no XLA compile falls in a timed
call.
Throughput: test_2016_flickr sorted by length in batches of 64, the same batches for every contender, the contenders
taking turns on every batch; sentences/s and target tokens/s (subword pieces of the output, end token counted) per
round, medians over rounds. Latency: single sentences, the contenders taking turns on each; p50 and p95 over all
rounds. BLEU (sacreBLEU, cased) of each contender's batch-64 output on all of test_2016_flickr. CPU time over wall
time while translating batches of 64 (2.0 = both cores busy; the C API loader's and CTranslate2's are their own
processes'). Machine load: `os.getloadavg()` before and after, and how many cores other processes kept busy
(/proc/stat).

Usage:
    .venv/bin/python benchmarks/bench_translation_serving.py --output benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_translation_serving.py --quick
"""

import argparse
import json
import os
import pathlib
import resource
import statistics
import tempfile
import time

import tensorflow as tf
from ctranslate2_worker import CTranslate2Process
from results_file import environment_line, machine_load, replace_section
from timing import OtherLoad

from kzoo.data import multi30k, shipped_model
from kzoo.export import export_ctranslate2, export_translator
from kzoo.export.ctranslate2_export import ctranslate2_beam_options
from kzoo.serving import ContractLoader
from kzoo.serving.model_config import saved_model_versions
from kzoo.serving.warmup import WARMUP_FILE, read_tfrecords
from kzoo.serving.wire_format import decode_tensor, logged_request, map_entries
from kzoo.train.quality import translation_scores
from kzoo.translator import SETTINGS_FILE, Translator

SECTION = "translation-serving"
THREADS = 2  # the cores of the machine the figures are for: CTranslate2's threads, kzoo's inter-op threads
BATCH = 64
MODEL = "transformer_multi30k_en_de"
NO_ONEDNN = {"TF_ENABLE_ONEDNN_OPTS": "0"}  # TensorFlow's own kernels (Eigen) instead of its oneDNN graph rewrites


def recorded_settings(version):
    """The decoding settings an exported translator version records (assets.extra/translator.json), without loading
    its weights."""
    return json.loads((version / "assets.extra" / SETTINGS_FILE).read_text())["settings"]


def warmup_texts(version):
    """The batches of text of a version's warm-up requests (assets.extra/tf_serving_warmup_requests); [] without."""
    path = version / "assets.extra" / WARMUP_FILE
    if not path.is_file():
        return []
    return [[text.decode("utf-8") for text in decode_tensor(map_entries(logged_request(record), 2)["text"])[2]]
            for record in read_tfrecords(path.read_bytes())]


def own_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process_cpu_seconds(pid):
    """User plus system CPU seconds of another process (/proc/<pid>/stat, fields 14 and 15)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def described(version):
    """"version N (its speed and beam settings)", from what the version records."""
    settings = recorded_settings(version)
    jit = settings.get("jit_max_sentences")
    return (f"version {version.name} ({f'XLA up to {jit} sentences' if jit else 'no XLA'}, "
            f"{settings.get('lanes', 1)} lane{'s' if settings.get('lanes', 1) > 1 else ''}, beam "
            f"{settings['beam_size']}, length penalty {settings['length_penalty']})")


def older_versions(versions):
    """The older version to time beside the newest: the one before it (none if the newest is the only one)."""
    return versions[-2:-1]


def contenders(version, translator, folder, older=()):
    """{name: (translate(texts) -> strings, cpu_seconds() -> float, close())}; `older`: earlier versions to time as
    they are (their own weights and settings)."""
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the SavedModel's graph uses)

    def loaded(saved_model_folder):
        return tf.saved_model.load(str(saved_model_folder)).signatures["serving_default"]

    serve = loaded(version)
    serve_quantized = {  # row label: the int8 export computing in that dtype
        f"kzoo SavedModel int8 weights{matmuls}, TF Python": loaded(export_translator(
            translator, folder / f"saved_model_int8_{compute}", quantization="int8", compute_dtype=compute))
        for compute, matmuls in (("float32", ", float32 matmuls"), ("bfloat16", " + bfloat16 matmuls"))}
    def threaded(intra, environment=None):  # README's inter-op threads, one per core
        return ContractLoader(version, intra_op_parallelism=intra, inter_op_parallelism=THREADS,
                              environment=environment)

    flagged, latency = threaded(1), threaded(THREADS)
    flagged_eigen, latency_eigen = threaded(1, NO_ONEDNN), threaded(THREADS, NO_ONEDNN)
    default = ContractLoader(version)
    ctranslate2_models = {"float32": ({}, "default"), "int8": ({"quantization": "int8"}, "int8")}  # export, compute
    float32, int8 = (CTranslate2Process(export_ctranslate2(translator.model, translator.tokenizer, folder / name,
                                                           **export_options), compute_type, version, THREADS)
                     for name, (export_options, compute_type) in ctranslate2_models.items())

    def saved_model(serve):
        return lambda texts: [t.decode("utf-8")
                              for t in serve(text=tf.constant(texts, tf.string))["translation"].numpy()]

    def c_api(loader):
        return (lambda texts: loader.rest({"instances": texts})["predictions"],
                lambda: process_cpu_seconds(loader._process.pid), loader.close)

    def ct2(worker):
        return worker.translate, lambda: process_cpu_seconds(worker.pid), worker.close

    def nothing():
        pass

    previous = {f"kzoo SavedModel, {described(v)}, TF Python": loaded(v) for v in older}
    if translator.jit_max_sentences or translator.lanes > 1:  # the same weights without the speed settings
        plain = Translator(translator.model, translator.tokenizer,
                           **{**translator.settings(), "jit_max_sentences": 0, "lanes": 1})
        previous["kzoo SavedModel, same weights without XLA or lanes, TF Python"] = loaded(
            export_translator(plain, folder / "saved_model_plain"))
    return {
        "kzoo SavedModel, TF Python": (saved_model(serve), own_cpu_seconds, nothing),
        **{name: (saved_model(signature), own_cpu_seconds, nothing)
           for name, signature in {**previous, **serve_quantized}.items()},
        "kzoo SavedModel, C API (TF Serving's loader), README's threads": c_api(flagged),
        f"kzoo SavedModel, C API, {THREADS} intra-op threads (README's latency flags)": c_api(latency),
        "kzoo SavedModel, C API, README's threads, TF_ENABLE_ONEDNN_OPTS=0": c_api(flagged_eigen),
        f"kzoo SavedModel, C API, {THREADS} intra-op threads, TF_ENABLE_ONEDNN_OPTS=0": c_api(latency_eigen),
        "kzoo SavedModel, C API, TF Serving's default threads": c_api(default),
        "CTranslate2 float32": ct2(float32),
        "CTranslate2 int8": ct2(int8),
    }


def timed(translate, cpu_seconds, texts):
    cpu, start = cpu_seconds(), time.perf_counter()
    out = translate(texts)
    return out, time.perf_counter() - start, cpu_seconds() - cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", help="RESULTS.md to write the section into")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--singles", type=int, default=60, help="batch-1 sentences per round (default 60)")
    parser.add_argument("--quick", action="store_true", help="1 round, 2 batches of 8, 3 single sentences (smoke)")
    args = parser.parse_args(argv)
    tf.config.threading.set_intra_op_parallelism_threads(1)  # README's TF Serving flags
    tf.config.threading.set_inter_op_parallelism_threads(THREADS)
    load_before, other = os.getloadavg(), OtherLoad()
    env = environment_line()

    english, german = multi30k("test_2016_flickr")
    if args.quick:
        args.rounds, args.singles, batch, english, german = 1, 3, 8, english[:16], german[:16]
    else:
        batch = BATCH
    order = sorted(range(len(english)), key=lambda i: len(english[i]))
    batches = [order[i : i + batch] for i in range(0, len(order), batch)]
    singles = [english[i] for i in range(0, len(english), max(1, len(english) // args.singles))][: args.singles]
    versions = saved_model_versions(shipped_model(MODEL))
    translator = Translator.load(versions[-1])
    older = older_versions(versions)
    warmup = [texts for version in [versions[-1], *older] for texts in warmup_texts(version)]

    with tempfile.TemporaryDirectory() as folder:
        clients = contenders(versions[-1], translator, pathlib.Path(folder), older)
        for translate, _, _ in clients.values():  # warm-up: traces, kernels, XLA's compiles, the loader's first run
            for texts in [english[:2], [english[0]], *warmup]:
                translate(texts)
        seconds = {name: [] for name in clients}  # per round: seconds over all batches
        cpu = {name: [] for name in clients}
        tokens = {name: 0 for name in clients}
        latencies = {name: [] for name in clients}
        outputs = {name: [None] * len(english) for name in clients}
        for round_ in range(args.rounds):
            round_seconds = {name: 0.0 for name in clients}
            for rows in batches:
                texts = [english[i] for i in rows]
                for name, (translate, cpu_seconds, _) in clients.items():
                    out, wall, used = timed(translate, cpu_seconds, texts)
                    round_seconds[name] += wall
                    cpu[name].append(used / wall)
                    if round_ == 0:
                        for i, translation in zip(rows, out):
                            outputs[name][i] = translation
            for name in clients:
                seconds[name].append(round_seconds[name])
            for text in singles:
                for name, (translate, cpu_seconds, _) in clients.items():
                    latencies[name].append(1000 * timed(translate, cpu_seconds, [text])[1])
            print(f"round {round_ + 1}/{args.rounds}: " + ", ".join(
                f"{name} {len(english) / s:.1f} sentences/s" for name, s in round_seconds.items()), flush=True)
        for name, (_, _, close) in clients.items():
            pieces = translator.tokenizer.tokenize(outputs[name]).row_lengths().numpy()
            tokens[name] = int(pieces.sum()) + len(english)  # the end token of each sentence counted
            close()
    load_after, other_cores = os.getloadavg(), other.cores()

    reference = outputs["kzoo SavedModel, TF Python"]
    table = [f"| contender | sentences/s, batch {batch} | target tokens/s | per round (s) | latency p50, batch 1 (ms) "
             "| p95 (ms) | BLEU | same string as kzoo | CPU time / wall time |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name in clients:
        rate = len(english) / statistics.median(seconds[name])
        ordered = sorted(latencies[name])
        p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
        bleu = translation_scores(outputs[name], german)["bleu"]
        same = sum(a == b for a, b in zip(outputs[name], reference))
        table.append(f"| {name} | {rate:.1f} | {tokens[name] / statistics.median(seconds[name]):,.0f} | "
                     f"{', '.join(f'{s:.1f}' for s in seconds[name])} | {statistics.median(ordered):.1f} | "
                     f"{p95:.1f} | {bleu:.2f} | {same}/{len(english)} | {statistics.median(cpu[name]):.2f} |")
    text = "\n".join([
        "## Translation serving: kzoo's exported translator and CTranslate2, same weights",
        "",
        f"{env} · CTranslate2 "
        f"{__import__('ctranslate2').__version__}",
        "",
        f"The shipped translator ({MODEL}/{versions[-1].name}), beam {translator.beam_size} (length penalty "
        f"{translator.length_penalty}; CTranslate2 {ctranslate2_beam_options(translator)['length_penalty']}), "
        f"test_2016_flickr ({len(english)} sentences) "
        f"text in → text out. Batch {batch}: the same length-sorted batches for every contender, the contenders "
        f"taking turns on every batch, {args.rounds} rounds (sentences/s and tokens/s: medians over rounds). Batch "
        f"1: {len(singles)} sentences a round, the contenders taking turns on each. TF Python: 1 intra-op and "
        f"{THREADS} inter-op threads; CTranslate2: {THREADS} threads. BLEU: sacreBLEU, cased, of the batch output; "
        "\"same string\": how many translations equal the TF Python SavedModel's. CPU time / wall time: the median "
        f"over batches of {batch}.",
        "",
        *table,
        "",
        f"{machine_load(load_before, load_after)}; other processes kept {other_cores:.2f} of the "
        f"{os.cpu_count()} cores busy on average during the run. The machine is shared: CTranslate2's OpenMP threads "
        "slow down most when another process competes for the cores, so compare the rows of one run, and rerun on "
        "a quiet machine for absolute figures.",
    ])
    print(text)
    if args.output and not args.quick:
        replace_section(args.output, SECTION, text)


if __name__ == "__main__":
    main()
