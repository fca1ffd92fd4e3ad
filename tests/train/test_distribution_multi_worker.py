"""Two worker processes on 127.0.0.1, each with its TF_CONFIG, train with Keras `fit` under kzoo.train.strategy()
(MultiWorkerMirroredStrategy, Keras patched by kzoo.train.multi_worker), then `evaluate` and `predict`."""

import numpy as np

from tests.train import fit_worker
from tests.train.worker_processes import Processes, assert_same_training, free_ports, load, tf_config


def test_two_workers_fit_evaluate_and_predict_like_one_process_on_the_same_global_batch(tmp_path):
    ports = free_ports(2)
    workers = ["worker-0", "worker-1"]
    with Processes(tmp_path) as processes:
        for index, name in enumerate(workers):
            # Asking for what fails under MultiWorkerMirroredStrategy, XLA and 2 steps per execution: refused.
            processes.start(name, [tmp_path / f"{name}.npz", "--jit-compile", "true", "--steps-per-execution", 2],
                            tf_config=tf_config(ports, index))
        processes.wait(workers)
    reference = fit_worker.train()  # one process, one device, global batch 8: what each step should do
    assert "jit_compile=True is turned off under MultiWorkerMirroredStrategy with 2 replica(s)" in processes.log(
        "worker-0")
    first, second = (load(tmp_path / f"{name}.npz") for name in workers)
    assert not first["jit_compile"] and first["steps_per_execution"] == 1
    assert first["replicas"] == second["replicas"] == 2  # each worker trained on half of every global batch
    for a, b in zip(first["weights"], second["weights"]):
        np.testing.assert_array_equal(a, b)  # the all-reduce keeps the workers' weights identical
    assert_same_training(first, reference)
    assert first["iterations"] == reference["iterations"] == fit_worker.EPOCHS * fit_worker.EXAMPLES // 8
