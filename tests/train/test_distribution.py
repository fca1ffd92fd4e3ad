import logging
import warnings

import pytest
import tensorflow as tf
from keras.src.backend.tensorflow import trainer as keras_tf_trainer

from kzoo.train import batches_for, compile_options, distribution, multi_worker, strategy
from tests.train import fit_worker
from tests.train.worker_processes import Processes, assert_same_training, load


@pytest.mark.parametrize(
    "kind, workers, gpus, tpu_found, expected",
    [
        (None, [], 0, True, "tpu"),
        (None, ["a:1", "b:2"], 4, True, "tpu"),  # a TPU wins over everything else
        (None, ["a:1", "b:2"], 4, False, "multi_worker"),
        (None, ["a:1"], 4, False, "mirrored"),  # one worker in TF_CONFIG is not a cluster
        (None, [], 2, False, "mirrored"),
        (None, [], 1, False, "default"),
        (None, [], 0, False, "default"),
        ("default", ["a:1", "b:2"], 4, True, "default"),  # an explicit choice overrides the detection
        ("mirrored", [], 0, False, "mirrored"),
    ],
)
def test_strategy_choice_follows_the_detection_order(kind, workers, gpus, tpu_found, expected):
    chosen, reason = distribution.choose_strategy(kind, workers, gpus, tpu_found)
    assert chosen == expected
    assert reason


def test_an_unknown_kind_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"kind='gpu' is not a strategy kzoo knows; use one of \('tpu'"):
        strategy("gpu")


def test_tf_config_workers_are_read_and_bad_json_is_named(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {}}')
    assert distribution.tf_config_workers() == ["127.0.0.1:1", "127.0.0.1:2"]
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"chief": ["10.0.0.1:1"], "worker": ["10.0.0.2:1"]}}')
    assert distribution.tf_config_workers() == ["10.0.0.1:1", "10.0.0.2:1"]  # a chief is a worker too
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match=r"TF_CONFIG is not valid JSON .*'\{not json'"):
        distribution.tf_config_workers()


class FakeResolver:
    def master(self):
        return "grpc://10.0.0.2:8470"


def test_a_tpu_found_by_the_resolver_is_connected_initialised_and_used(monkeypatch, caplog):
    resolver, calls = FakeResolver(), []
    monkeypatch.setattr(distribution, "tpu_resolver", lambda tpu=None: (resolver, None))
    monkeypatch.setattr(tf.config, "experimental_connect_to_cluster", lambda r: calls.append(("connect", r)))
    monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", lambda r: calls.append(("initialize", r)))
    monkeypatch.setattr(tf.distribute, "TPUStrategy", lambda r: calls.append(("TPUStrategy", r)) or "tpu strategy")
    with caplog.at_level(logging.INFO, logger="kzoo"):
        assert strategy() == "tpu strategy"
    assert calls == [("connect", resolver), ("initialize", resolver), ("TPUStrategy", resolver)]
    assert "TPUStrategy (a TPU cluster resolver found a TPU): grpc://10.0.0.2:8470" in caplog.text


def test_asking_for_a_tpu_where_there_is_none_says_so():
    with pytest.raises(ValueError, match="kind='tpu' was asked for, but no TPU was found"):
        strategy("tpu")


def test_without_tpu_workers_or_gpus_the_default_strategy_is_used_and_logged(monkeypatch, caplog):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with caplog.at_level(logging.INFO, logger="kzoo"):
        chosen = strategy()
    assert chosen is tf.distribute.get_strategy()
    assert "Using the default strategy (no TPU, no multi-worker TF_CONFIG, 0 GPU(s)" in caplog.text


class FakeStrategy:
    def __init__(self, replicas):
        self.num_replicas_in_sync = replicas


class FakeTPUStrategy(tf.distribute.TPUStrategy):
    def __init__(self):  # no TPU here: only the type matters
        pass

    num_replicas_in_sync = 8


def test_compile_options_turn_off_what_a_strategy_cannot_run():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about on one replica
        assert compile_options(FakeStrategy(1), jit_compile=True, steps_per_execution=8) == {
            "jit_compile": True, "steps_per_execution": 8}
    with pytest.warns(UserWarning, match=r"jit_compile=True is turned off .*keras-team/keras#19005"):
        with pytest.warns(UserWarning, match=r"steps_per_execution=4 is set to 1 .*keras-team/keras#19246"):
            options = compile_options(FakeStrategy(2), jit_compile=True, steps_per_execution=4)
    assert options == {"jit_compile": False, "steps_per_execution": 1}
    with pytest.warns(UserWarning, match="jit_compile=True is turned off under TPUStrategy with 8 replica"):
        options = compile_options(FakeTPUStrategy(), jit_compile=True, steps_per_execution=32)
    assert options == {"jit_compile": False, "steps_per_execution": 32}
    assert compile_options(FakeStrategy(2)) == {"jit_compile": "auto", "steps_per_execution": 1}
    with pytest.raises(ValueError, match="steps_per_execution=0 must be at least 1"):
        compile_options(FakeStrategy(1), steps_per_execution=0)


def test_tpu_batches_must_have_one_known_shape():
    features = {"token_ids": tf.zeros((10, 6), tf.int32)}
    ragged_batches = tf.data.Dataset.from_tensor_slices((features, tf.zeros(10))).batch(4)
    assert batches_for(tf.distribute.get_strategy(), ragged_batches) is ragged_batches
    with pytest.raises(ValueError, match=r"0/token_ids \(None, 6\), 1 \(None,\).*drop_remainder=True"):
        batches_for(FakeTPUStrategy(), ragged_batches)
    static = tf.data.Dataset.from_tensor_slices((features, tf.zeros(10))).batch(4, drop_remainder=True)
    assert batches_for(FakeTPUStrategy(), static).element_spec == static.element_spec


def test_the_multi_worker_patch_checks_the_keras_source_it_replaces():
    multi_worker.check_keras_sources()  # the installed Keras is one the patch was checked on

    def reduce_per_replica(values, strategy, reduction):  # what a changed Keras might have
        return values

    functions = {**multi_worker._keras_functions(), "reduce_per_replica": reduce_per_replica}
    with pytest.raises(RuntimeError, match=r"changed or are gone: \['reduce_per_replica'\].*keras-team/keras#20585"):
        multi_worker.check_keras_sources(functions)
    gone = {**multi_worker._keras_functions(), "_collective_all_reduce_multi_worker": None}
    with pytest.raises(RuntimeError, match=r"\['_collective_all_reduce_multi_worker'\]"):
        multi_worker.check_keras_sources(gone)


def test_the_multi_worker_patch_leaves_other_strategies_alone():
    before = keras_tf_trainer.reduce_per_replica
    assert multi_worker.patch_keras_for_multi_worker(tf.distribute.get_strategy()) is False
    assert keras_tf_trainer.reduce_per_replica is before


def test_mirrored_over_two_cpu_devices_trains_like_one_device(tmp_path):
    with Processes(tmp_path) as processes:
        # Asking for XLA and 2 steps per execution, which fail under MirroredStrategy: compile_options says no.
        processes.start("mirrored", [tmp_path / "mirrored.npz", "--kind", "mirrored", "--logical-cpus", 2,
                                     "--jit-compile", "true", "--steps-per-execution", 2])
        reference = fit_worker.train()  # one device, in this process, while the other trains
        processes.wait(["mirrored"])
    log = processes.log("mirrored")
    assert "jit_compile=True is turned off under MirroredStrategy with 2 replica(s)" in log
    assert "steps_per_execution=2 is set to 1 under MirroredStrategy with 2 replicas" in log
    mirrored = load(tmp_path / "mirrored.npz")
    assert not mirrored["jit_compile"] and mirrored["steps_per_execution"] == 1
    assert mirrored["replicas"] == 2 and reference["replicas"] == 1
    assert_same_training(mirrored, reference)
    assert reference["losses"][-1] < 0.8 * reference["losses"][0]  # it learned something
