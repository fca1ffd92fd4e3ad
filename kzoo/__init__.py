"""kzoo: the Transformer and BERT from first principles, as Keras 3 layers.

`import kzoo` imports Keras and kzoo's Keras-only modules (layers, metrics, models, and the losses, schedules and
optimizers that saved models name), so that `keras.saving.load_model` finds every kzoo class; everything else
(text, data, decoding, training, export, serving) is imported on first use. kzoo's own command-line tools
(`python -m kzoo...`) defer even that until they have read their flags, so `--help` answers at once.

Imported before TensorFlow, kzoo keeps TensorFlow's C++ start-up lines (absl's banner, INFO lines, the no-driver
`cuInit` error 303 of a CPU machine) off stderr and passes every other line on (`kzoo.console`); `KZOO_TF_LOGS=1`
shows them all.
"""

import sys

from kzoo._lazy import lazy_namespace
from kzoo._version import __version__

_SUBPACKAGES = ("layers", "metrics", "checkpoints", "models", "data", "text", "decoding", "train", "export",
                "serving", "translator", "demo")
_MODELS = ("Bert", "BertClassifier", "BertPretrainer", "BertQuestionAnswerer", "BertSentenceEmbedder",
           "BertTokenClassifier", "Transformer",
           "bert_tiny", "bert_mini", "bert_small", "bert_medium", "bert_base", "bert_large", "transformer_small",
           "transformer_base", "transformer_big")
__getattr__, __dir__ = lazy_namespace(__name__, {
    **{name: f"kzoo.{name}" for name in _SUBPACKAGES},
    **{name: "kzoo.models" for name in _MODELS},
    "Translator": "kzoo.translator",
})

# Modules that define the classes and functions kzoo's saved models name: importing them registers those with Keras.
_SERIALIZABLE = ("kzoo.layers", "kzoo.metrics", "kzoo.models", "kzoo.train.losses", "kzoo.train.schedules",
                 "kzoo.train.optimizers")


def register_serializables():
    """Import the modules whose classes kzoo's `.keras` files name, registering them with Keras. `import kzoo` calls
    it, except inside kzoo's own command-line tools, which call it once they have read their flags.

    Example:
    ```python
    kzoo.register_serializables()
    keras.saving.get_registered_object("kzoo>Transformer")  # kzoo.models.transformer.Transformer
    ```
    """
    import importlib

    for module in _SERIALIZABLE:
        importlib.import_module(module)


def _running_a_kzoo_tool():
    """Whether this process is `python -m kzoo...`, whose tools import Keras (and TensorFlow) only after reading
    their flags."""
    if sys.argv[:1] != ["-m"]:  # Python sets argv[0] to "-m" while it locates the module that `-m` names
        return False
    argv = list(getattr(sys, "orig_argv", ()))
    return "-m" in argv[:-1] and argv[argv.index("-m") + 1].split(".")[0] == "kzoo"


if not _running_a_kzoo_tool():
    from kzoo.console import quiet_tensorflow

    quiet_tensorflow()
    register_serializables()
