"""One CTranslate2 model in a process of its own, for bench_translation_serving.py: the way a CTranslate2 user
serves one model, and the way the C-API contender runs kzoo's SavedModel.

Measured 2026-12-04 (AMD EPYC, 2 cores, quiet): with a second `ctranslate2.Translator` (the int8 one) alive in the
same process, CTranslate2 float32 translated 108-117 sentences/s of test_2016_flickr in batches of 64 even when the
int8 model was not called, against 155-175 with the float32 model alone; kzoo's TensorFlow decoding between its
batches, in the process or in another one, cost it little (149-174). So each CTranslate2 contender gets its own
process, started by `CTranslate2Process`.

Protocol: argv is the CTranslate2 model folder, its compute type, the kzoo SavedModel version whose tokenizer and
beam settings to use, and the intra-op threads; the worker answers "ready" once loaded, then for every line of
stdin (a JSON list of strings) one line of stdout (a JSON list of translations). Anything else the libraries print
to stdout goes to stderr.
"""

import json
import os
import pathlib
import subprocess
import sys


class CTranslate2Process:
    """A CTranslate2 model served by this script in a child process: `translate(texts)`, `pid`, `close()`."""

    def __init__(self, folder, compute_type, version, threads):
        self._process = subprocess.Popen(
            [sys.executable, str(pathlib.Path(__file__).resolve()), str(folder), compute_type, str(version),
             str(threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
        self.pid = self._process.pid
        self._expect("ready")

    def _expect(self, what=None):
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the CTranslate2 worker (pid {self.pid}) exited with {self._process.wait()}; "
                               "its stderr above says why")
        answer = json.loads(line)
        if what is not None and answer != what:
            raise RuntimeError(f"the CTranslate2 worker answered {answer!r}, expected {what!r}")
        return answer

    def translate(self, texts):
        self._process.stdin.write(json.dumps(list(texts)) + "\n")
        self._process.stdin.flush()
        return self._expect()

    def close(self):
        self._process.stdin.close()
        self._process.wait(timeout=60)


def main(folder, compute_type, version, threads):
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # library prints go to stderr, never into the answers
    import ctranslate2

    from kzoo.export.ctranslate2_export import ctranslate2_beam_options, translate_ctranslate2
    from kzoo.translator import Translator

    translator = Translator.load(version)
    model = ctranslate2.Translator(folder, compute_type=compute_type, intra_threads=int(threads), inter_threads=1)
    options = ctranslate2_beam_options(translator)
    print(json.dumps("ready"), file=answers, flush=True)
    for line in sys.stdin:
        texts = json.loads(line)
        # The whole request as one batch, as kzoo's translator decodes a request (it sorts and cuts sub-batches
        # itself; CTranslate2 sorts a batch by length too).
        translations = translate_ctranslate2(model, translator.tokenizer, texts, max_batch_size=max(1, len(texts)),
                                             **options)
        print(json.dumps(translations), file=answers, flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
