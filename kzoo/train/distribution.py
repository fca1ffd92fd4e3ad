"""Pick the `tf.distribute` strategy for the process kzoo runs in."""

import json
import logging
import os

import tensorflow as tf

logger = logging.getLogger("kzoo")

STRATEGIES = ("tpu", "multi_worker", "mirrored", "default")


def _tf_config_workers():
    try:
        tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}): {os.environ['TF_CONFIG']!r}") from None
    return tf_config.get("cluster", {}).get("worker", [])


def _tpu_resolver():
    try:
        return tf.distribute.cluster_resolver.TPUClusterResolver()
    except (ValueError, tf.errors.NotFoundError):
        return None


def strategy(kind=None):
    """The strategy for this process: a TPU cluster, several workers, several GPUs, or the default (one device).

    Detection, in order: a TPU that `TPUClusterResolver` finds; `TF_CONFIG` naming more than one worker
    (`MultiWorkerMirroredStrategy`); more than one visible GPU (`MirroredStrategy`); otherwise the default strategy.
    The choice and its reason are logged to the "kzoo" logger.

    Args:
        kind: str, optional. One of "tpu", "multi_worker", "mirrored", "default" to override the detection.

    Returns:
        A `tf.distribute.Strategy`; build and compile models inside `strategy.scope()`.
    """
    if kind is not None and kind not in STRATEGIES:
        raise ValueError(f"kind={kind!r} is not a strategy kzoo knows; use one of {STRATEGIES} or None to detect.")
    workers = _tf_config_workers()
    gpus = tf.config.list_logical_devices("GPU")
    resolver = _tpu_resolver() if kind in (None, "tpu") else None

    if kind == "tpu" or (kind is None and resolver is not None):
        if resolver is None:
            raise ValueError("kind='tpu' was asked for, but TPUClusterResolver found no TPU.")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        logger.info("Using TPUStrategy: TPUClusterResolver found %s.", resolver.master())
        return tf.distribute.TPUStrategy(resolver)
    if kind == "multi_worker" or (kind is None and len(workers) > 1):
        logger.info("Using MultiWorkerMirroredStrategy: TF_CONFIG names %d workers.", len(workers))
        return tf.distribute.MultiWorkerMirroredStrategy()
    if kind == "mirrored" or (kind is None and len(gpus) > 1):
        logger.info("Using MirroredStrategy over %d GPUs.", len(gpus))
        return tf.distribute.MirroredStrategy()
    logger.info("Using the default strategy: no TPU, no multi-worker TF_CONFIG, %d GPU(s).", len(gpus))
    return tf.distribute.get_strategy()
