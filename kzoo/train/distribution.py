"""Pick the `tf.distribute` strategy for the process kzoo runs in, and the compile settings it can run."""

import json
import logging
import os
import warnings

import keras
import tensorflow as tf

from kzoo.train.multi_worker import patch_keras_for_multi_worker

logger = logging.getLogger("kzoo")

STRATEGIES = ("tpu", "multi_worker", "mirrored", "default")


def tf_config_workers():
    """The addresses of the workers `TF_CONFIG` names, its chief included (an empty list without `TF_CONFIG`).

    Example:
    ```python
    import json, os
    from unittest import mock
    from kzoo.train.distribution import tf_config_workers

    cluster = {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222"]}, "task": {"type": "chief", "index": 0}}
    with mock.patch.dict(os.environ, {"TF_CONFIG": json.dumps(cluster)}):
        assert tf_config_workers() == ["host0:2222", "host1:2222"]
    ```
    """
    try:
        tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}): {os.environ['TF_CONFIG']!r}") from None
    cluster = tf_config.get("cluster", {})
    return cluster.get("chief", []) + cluster.get("worker", [])


def tpu_resolver(tpu=None):
    """A `TPUClusterResolver` for `tpu` (a name, a grpc:// address, "local" on a TPU VM, or None to look for one the
    environment names), or None with the reason when there is none.

    Example:
    ```python
    from kzoo.train.distribution import tpu_resolver

    resolver, why_not = tpu_resolver()
    print(resolver.master() if resolver else f"no TPU here: {why_not}")
    ```
    """
    try:
        return tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu), None
    except (ValueError, RuntimeError, tf.errors.NotFoundError) as error:
        return None, f"TPUClusterResolver: {error}"


def choose_strategy(kind, workers, gpus, tpu_found):
    """The kind of strategy to use and why, from what the process sees.

    Args:
        kind: str or None. An explicit choice (one of `STRATEGIES`), or None to detect.
        workers: list of str. The worker addresses `TF_CONFIG` names.
        gpus: int. The number of visible GPUs.
        tpu_found: bool. Whether a TPU resolver found a TPU.

    Returns:
        (kind, reason), both str.

    Example:
    ```python
    from kzoo.train.distribution import choose_strategy

    assert choose_strategy(None, workers=["a:1", "b:1"], gpus=0, tpu_found=False) == (
        "multi_worker", "TF_CONFIG names 2 workers")
    assert choose_strategy(None, workers=[], gpus=4, tpu_found=False)[0] == "mirrored"
    assert choose_strategy("default", workers=[], gpus=4, tpu_found=False)[0] == "default"
    ```
    """
    if kind is not None and kind not in STRATEGIES:
        raise ValueError(f"kind={kind!r} is not a strategy kzoo knows; use one of {STRATEGIES} or None to detect.")
    if kind is not None:
        return kind, f"asked for kind={kind!r}"
    if tpu_found:
        return "tpu", "a TPU cluster resolver found a TPU"
    if len(workers) > 1:
        return "multi_worker", f"TF_CONFIG names {len(workers)} workers"
    if gpus > 1:
        return "mirrored", f"{gpus} GPUs are visible"
    return "default", f"no TPU, no multi-worker TF_CONFIG, {gpus} GPU(s)"


def tpu_strategy(resolver):
    """Connect to the TPU cluster `resolver` found, initialise it, and return a `TPUStrategy` over it.

    Example:
    ```python
    from kzoo.train.distribution import tpu_resolver, tpu_strategy

    resolver, _ = tpu_resolver()
    if resolver is not None:  # a TPU VM, or TPU_NAME set
        strategy = tpu_strategy(resolver)
        print(strategy.num_replicas_in_sync, "TPU cores")
    ```
    """
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def strategy(kind=None, tpu=None):
    """The strategy for this process: a TPU cluster, several workers, several GPUs, or the default (one device).

    Detection, in order: a TPU that `TPUClusterResolver` finds (`TPUStrategy`); `TF_CONFIG` naming more than one
    worker (`MultiWorkerMirroredStrategy`, with Keras patched for it: see `kzoo.train.multi_worker`); more than one
    visible GPU (`MirroredStrategy` over all of them; asked for with kind="mirrored" on a machine without GPUs, over
    its logical CPU devices); otherwise the default strategy. The choice and its reason are logged to the
    "kzoo" logger. Batches stay global: `fit` splits each batch across the replicas (and workers), so a recipe's
    `batch_size` means the same under every strategy. Pass `compile_options(strategy)` to `compile` to avoid the
    settings a strategy cannot run.

    Args:
        kind: str, optional. One of "tpu", "multi_worker", "mirrored", "default" to override the detection.
        tpu: str, optional. The TPU to resolve: a name, a grpc:// address, or "local" on a Cloud TPU VM. Default:
            whatever `TPUClusterResolver` finds in the environment (`TPU_NAME`, Cloud metadata).

    Returns:
        A `tf.distribute.Strategy`; build and compile models inside `strategy.scope()`.

    Example:

    ```python
    strategy = kzoo.train.strategy()
    with strategy.scope():
        model = kzoo.transformer_small(vocabulary_size=8000)
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                      **kzoo.train.compile_options(strategy))
    ```
    """
    resolver, no_tpu = tpu_resolver(tpu) if kind in (None, "tpu") else (None, "not looked for")
    chosen, reason = choose_strategy(kind, tf_config_workers(), len(tf.config.list_physical_devices("GPU")),
                                     resolver is not None)
    if chosen == "tpu":
        if resolver is None:
            raise ValueError(f"kind='tpu' was asked for, but no TPU was found ({no_tpu}); pass tpu= its name or "
                             "address, or tpu='local' on a Cloud TPU VM.")
        logger.info("Using TPUStrategy (%s): %s.", reason, resolver.master())
        return tpu_strategy(resolver)
    if chosen == "multi_worker":
        chosen_strategy = tf.distribute.MultiWorkerMirroredStrategy()
        patch_keras_for_multi_worker(chosen_strategy)
        logger.info("Using MultiWorkerMirroredStrategy (%s): %d replicas in sync.", reason,
                    chosen_strategy.num_replicas_in_sync)
        return chosen_strategy
    if chosen == "mirrored":
        # Every GPU, or, on a machine without one, every logical CPU device (MirroredStrategy() would take CPU:0 only).
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        chosen_strategy = tf.distribute.MirroredStrategy([device.name for device in devices])
        logger.info("Using MirroredStrategy (%s) over %s.", reason, ", ".join(device.name for device in devices))
        return chosen_strategy
    logger.info("Using the default strategy (%s; %s).", reason, no_tpu)
    return tf.distribute.get_strategy()


def is_tpu_strategy(strategy):
    """Whether `strategy` is a `TPUStrategy` (or a subclass).

    Example:
    ```python
    from kzoo.train.distribution import is_tpu_strategy

    assert not is_tpu_strategy(tf.distribute.get_strategy())
    ```
    """
    return isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))


def public_name(strategy):
    """The name `tf.distribute` exports `strategy`'s class under (MultiWorkerMirroredStrategy's class is named
    CollectiveAllReduceStrategy).

    Example:
    ```python
    from kzoo.train.distribution import public_name

    assert public_name(tf.distribute.MirroredStrategy(["/cpu:0"])) == "MirroredStrategy"
    ```
    """
    for public, name in ((tf.distribute.MultiWorkerMirroredStrategy, "MultiWorkerMirroredStrategy"),
                         (tf.distribute.TPUStrategy, "TPUStrategy"),
                         (tf.distribute.MirroredStrategy, "MirroredStrategy")):
        if isinstance(strategy, public):
            return name
    return type(strategy).__name__


def batches_for(strategy, dataset):
    """`dataset` as `strategy` needs its batches: unchanged, except that under a TPU strategy every batch must have
    one fully known shape (XLA compiles the step for one shape), which is checked here rather than on the TPU.

    Batch with `drop_remainder=True` and pad sequences to a fixed length (`padded_batch(..., padded_shapes=...)`)
    to meet it. The batches stay global: `fit` splits each across the replicas.

    Args:
        strategy: the `tf.distribute.Strategy` the model trains under.
        dataset: a batched `tf.data.Dataset`.

    Returns:
        The dataset, prefetching under a TPU strategy.

    Example:
    ```python
    dataset = tf.data.Dataset.from_tensor_slices(np.zeros((10, 4), "int32")).batch(4)  # the last batch has 2
    assert kzoo.train.batches_for(tf.distribute.get_strategy(), dataset) is dataset  # fine for one device
    # A TPUStrategy refuses it, naming the unknown batch dimension: batch(4, drop_remainder=True) gives (4, 4).
    ```
    """
    if not is_tpu_strategy(strategy):
        return dataset
    unknown = [
        f"{'/'.join(str(key) for key in path) or 'element'} {spec.shape}"
        for path, spec in keras.tree.flatten_with_path(dataset.element_spec)
        if not spec.shape.is_fully_defined()
    ]
    if unknown:
        raise ValueError(
            f"TPUStrategy needs batches of one fully known shape, but these parts of the dataset's batches are not: "
            f"{', '.join(unknown)}. Batch with drop_remainder=True and pad sequences to a fixed length."
        )
    return dataset.prefetch(tf.data.AUTOTUNE)


def compile_options(strategy, jit_compile="auto", steps_per_execution=1):
    """The `jit_compile` and `steps_per_execution` to give `model.compile` under `strategy`.

    Each setting a strategy cannot run is turned off with a warning, instead of failing on the first step (both
    failures seen here with TF 2.21 and Keras 3.15.1, under `MirroredStrategy` over two CPU devices and under
    `MultiWorkerMirroredStrategy` with two workers):

    - `jit_compile` is False under any strategy with more than one replica, and under a TPU strategy (which compiles
      every step with XLA itself).
    - `steps_per_execution` is 1 under a multi-replica strategy other than TPU. TPU is left as asked: there it is
      the setting that matters most, and no TPU was reachable to check it.

    Args:
        strategy: the `tf.distribute.Strategy` the model is compiled under.
        jit_compile: bool or "auto", what you would pass to `compile`.
        steps_per_execution: int, what you would pass to `compile`.

    Returns:
        dict with keys "jit_compile" and "steps_per_execution", to pass to `compile` as keyword arguments.

    Example:
    ```python
    strategy = tf.distribute.get_strategy()  # one device: both settings run as asked
    options = kzoo.train.compile_options(strategy, jit_compile=True, steps_per_execution=8)
    assert options == {"jit_compile": True, "steps_per_execution": 8}
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse", **options)
    ```
    """
    if steps_per_execution < 1:
        raise ValueError(f"steps_per_execution={steps_per_execution} must be at least 1.")
    replicas = strategy.num_replicas_in_sync
    name = public_name(strategy)
    # XLA cannot compile the replicated step: under MirroredStrategy "Trying to access resource ... located in device
    # CPU:1 from device CPU:0" (keras-team/keras#19005); under MultiWorkerMirroredStrategy "Collectives are not yet
    # implemented for CPU devices when compiling with XLA" (TensorFlow, b/194942685). Keras's jit_compile="auto"
    # already stays off under any strategy.
    if jit_compile is True and (is_tpu_strategy(strategy) or replicas > 1):
        warnings.warn(f"jit_compile=True is turned off under {name} with {replicas} replica(s): TensorFlow cannot "
                      "compile a replicated Keras step with XLA (keras-team/keras#19005); TPUStrategy compiles with "
                      "XLA itself.", stacklevel=2)
        jit_compile = False
    # Keras 3.15 runs several steps in a tf.while_loop whose tf.cond around the replicated step fails: "You must feed
    # a value for placeholder tensor 'while/cond/Placeholder'" (a tf.cond around merge_call, keras-team/keras#19246).
    if steps_per_execution > 1 and replicas > 1 and not is_tpu_strategy(strategy):
        warnings.warn(f"steps_per_execution={steps_per_execution} is set to 1 under {name} with {replicas} "
                      "replicas: Keras 3.15's multi-step loop fails there (keras-team/keras#19246).", stacklevel=2)
        steps_per_execution = 1
    return {"jit_compile": jit_compile, "steps_per_execution": steps_per_execution}
