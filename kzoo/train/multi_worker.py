"""Let Keras 3 `fit`, `evaluate` and `predict` run under `MultiWorkerMirroredStrategy` (keras-team/keras#20585).

Keras's TensorFlow trainer (3.14.1 to 3.15.1 at least) fails in multi-worker mode for two reasons, both in
keras/src/backend/tensorflow/trainer.py:

1. `TensorFlowTrainer._maybe_symbolic_build` hands the whole per-replica `(x, y, sample_weight)` batch to
   `strategy.reduce("MEAN", batch, axis=None)`, only to read its shapes and dtypes. `MultiWorkerMirroredStrategy`
   reduces one value at a time and rejects the structure ("Attempt to convert a value (PerReplica:{...}) with an
   unsupported type"). The fix builds from this worker's first replica's batch, which has the same shapes and dtypes.
2. `reduce_per_replica` averages step outputs with `strategy.reduce("MEAN", v, axis=0)` in multi-worker mode. Step
   outputs are scalars (loss and metric results), so TensorFlow refuses ("Invalid reduction dimension 0 for input
   with 0 dimensions"); elsewhere Keras averages them across replicas element-wise, which is
   `strategy.reduce("MEAN", v, axis=None)`. The fix does that, in multi-worker mode only.

`patch_keras_for_multi_worker` installs both replacements, each of which hands every call that is not multi-worker
to the Keras original. Before it patches anything it checks that the Keras functions it replaces and the helper it
relies on are, character for character, the versions it was written against (`CHECKED_SOURCES`); on any other
Keras it refuses with an error instead of training with a patch that may no longer fit. Remove this module when
keras-team/keras#20585 is fixed in a Keras release kzoo requires.
"""

import hashlib
import inspect
import logging
import textwrap

import keras
import tensorflow as tf
from keras.src.backend.tensorflow import trainer as keras_tf_trainer

logger = logging.getLogger("kzoo")

ISSUE = "keras-team/keras#20585"

# sha256 of each function's source (inspect.getsource, dedented) in the Keras releases the patch was checked on.
CHECKED_SOURCES = {
    "TensorFlowTrainer._maybe_symbolic_build": "b0ca9a63ed295fb95457c54f8e7110b2672d9b7f5fc6ca021245201f9e7f46e3",
    "reduce_per_replica": "2e7d54b1e6edc29a8c6a7e6b66cd4c8be3ba7842412c93753ac3afe169fa7fb8",
    "_collective_all_reduce_multi_worker": "0302369d850e6694978fa7691c0e97b79cd0cf83a6bbef7caed8738e1f1a5c24",
}
CHECKED_KERAS_VERSIONS = ("3.14.1", "3.15.0", "3.15.1")

_originals = {}


def source_hash(function):
    """sha256 of a function's source code, dedented: what `CHECKED_SOURCES` records.

    Example:
    ```python
    from keras.src.backend.tensorflow import trainer
    from kzoo.train.multi_worker import CHECKED_SOURCES, source_hash

    assert source_hash(trainer.reduce_per_replica) == CHECKED_SOURCES["reduce_per_replica"]
    ```
    """
    return hashlib.sha256(textwrap.dedent(inspect.getsource(function)).encode()).hexdigest()


def _keras_functions():
    trainer = keras_tf_trainer.TensorFlowTrainer
    return {
        "TensorFlowTrainer._maybe_symbolic_build": getattr(trainer, "_maybe_symbolic_build", None),
        "reduce_per_replica": getattr(keras_tf_trainer, "reduce_per_replica", None),
        "_collective_all_reduce_multi_worker": getattr(keras_tf_trainer, "_collective_all_reduce_multi_worker", None),
    }


def _is_checked(name, function):
    try:
        return source_hash(function) == CHECKED_SOURCES[name]
    except (TypeError, OSError):  # gone (None) or without source: either way not the code the patch was checked on
        return False


def check_keras_sources(functions=None):
    """Raise `RuntimeError` unless the Keras functions the patch replaces are the ones it was checked against.

    Args:
        functions: dict, optional. Name -> function, as `CHECKED_SOURCES` names them; defaults to the installed
            Keras's (a test passes its own).

    Example:
    ```python
    from kzoo.train.multi_worker import check_keras_sources

    check_keras_sources()  # the installed Keras is one the patch was checked on: no error
    try:
        check_keras_sources({"reduce_per_replica": lambda values, strategy, reduction: values})
    except RuntimeError as error:
        assert "changed or are gone: ['reduce_per_replica']" in str(error)
    ```
    """
    functions = functions or _keras_functions()
    changed = [name for name, function in functions.items() if not _is_checked(name, function)]
    if changed:
        raise RuntimeError(
            f"kzoo's multi-worker fix for {ISSUE} was checked on Keras {', '.join(CHECKED_KERAS_VERSIONS)}, but in "
            f"the installed Keras {keras.__version__} these functions of keras/src/backend/tensorflow/trainer.py "
            f"changed or are gone: {changed}. kzoo will not patch code it has not read. If this Keras release fixes "
            f"{ISSUE}, remove kzoo/train/multi_worker.py; otherwise re-check the patch against the new source and "
            "add the new hashes to kzoo.train.multi_worker.CHECKED_SOURCES. Until then use Keras "
            f"{CHECKED_KERAS_VERSIONS[-1]} for multi-worker training."
        )


def is_multi_worker(strategy):
    """True for a `MultiWorkerMirroredStrategy` whose cluster has more than one worker: the test Keras's
    `_collective_all_reduce_multi_worker` makes, written out so that it holds whatever Keras does.

    Example:
    ```python
    from kzoo.train.multi_worker import is_multi_worker

    assert not is_multi_worker(tf.distribute.get_strategy())
    ```
    """
    return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
            and strategy.extended._in_multi_worker_mode())


def _maybe_symbolic_build(self, iterator=None, data_batch=None):
    strategy = self._distribute_strategy
    if iterator is None or strategy is None or not is_multi_worker(strategy):
        return _originals["_maybe_symbolic_build"](self, iterator=iterator, data_batch=data_batch)
    for _, _, batches in iterator:
        batch = next(batches)
        break
    # Building needs the batch's shapes and dtypes only; this worker's first replica's batch has them.
    data_batch = keras.tree.map_structure(
        lambda value: (
            strategy.experimental_local_results(value)[0]
            if isinstance(value, tf.distribute.DistributedValues)
            else value
        ),
        batch,
    )
    return _originals["_maybe_symbolic_build"](self, data_batch=data_batch)


def _reduce_per_replica(values, strategy, reduction):
    if reduction in ("auto", "mean") and is_multi_worker(strategy):
        # "auto" means "mean" for every strategy but TPUStrategy. Step outputs are averaged across replicas
        # element-wise, as Keras does on one worker; axis=0 would average along their first dimension.
        return keras.tree.map_structure(lambda value: strategy.reduce("MEAN", value, axis=None), values)
    return _originals["reduce_per_replica"](values, strategy, reduction)


def patch_keras_for_multi_worker(strategy):
    """Make Keras 3 `fit`, `evaluate` and `predict` work under a multi-worker `MultiWorkerMirroredStrategy`.

    Does nothing for any other strategy (including `MultiWorkerMirroredStrategy` on a single worker, which Keras
    handles) and nothing the second time. Otherwise it replaces `TensorFlowTrainer._maybe_symbolic_build` and
    `reduce_per_replica` in keras/src/backend/tensorflow/trainer.py with versions that fix the multi-worker case
    and pass every other call to the originals. `kzoo.train.strategy()` calls it; call it yourself if you create
    the strategy yourself.

    Args:
        strategy: the `tf.distribute.Strategy` models will be trained under.

    Returns:
        True if Keras is patched (now or before), False if the strategy needs no patch.

    Raises:
        RuntimeError: the installed Keras is not one the patch was checked on (see `check_keras_sources`).

    Example:

    ```python
    # With TF_CONFIG naming two workers, `strategy` would be tf.distribute.MultiWorkerMirroredStrategy() and the
    # call would patch Keras before any model is built under strategy.scope().
    strategy = tf.distribute.get_strategy()
    assert kzoo.train.multi_worker.patch_keras_for_multi_worker(strategy) is False  # one process: nothing to patch
    ```

    References:
        keras-team/keras#20585 (https://github.com/keras-team/keras/issues/20585).
    """
    if not is_multi_worker(strategy):
        return False
    if _originals:
        return True
    check_keras_sources()
    _originals["_maybe_symbolic_build"] = keras_tf_trainer.TensorFlowTrainer._maybe_symbolic_build
    _originals["reduce_per_replica"] = keras_tf_trainer.reduce_per_replica
    keras_tf_trainer.TensorFlowTrainer._maybe_symbolic_build = _maybe_symbolic_build
    keras_tf_trainer.reduce_per_replica = _reduce_per_replica
    logger.info("Patched Keras %s's TensorFlow trainer for multi-worker training (%s).", keras.__version__, ISSUE)
    return True
