"""The one test harness every kzoo layer and model goes through.

`run_layer_test` checks, for one layer class and one set of call inputs: config round-trip, explicit build and
weight counts, symbolic and eager calls, one `fit` step, mixed precision, and a `.keras` save and reload with
identical outputs. `run_model_test` does the same for a functional model class.
"""

import inspect
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf

MIXED_POLICIES = ("mixed_float16", "mixed_bfloat16")


def _symbolic_inputs(inputs):
    return {
        name: keras.Input(shape=value.shape[1:], dtype=str(value.dtype), name=name) for name, value in inputs.items()
    }


def _first_output(outputs):
    return outputs[0] if isinstance(outputs, (tuple, list)) else outputs


def _assert_config_round_trip(obj, init_kwargs):
    config = obj.get_config()
    for name, value in init_kwargs.items():
        assert name in config, f"get_config() lacks the constructor argument {name!r}"
    clone = obj.__class__.from_config(config)
    assert clone.get_config() == config


def _assert_fit_step_trains(model, inputs, target):
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss="mse")
    before = [np.asarray(w).copy() for w in model.trainable_weights]
    history = model.fit(inputs, target, batch_size=len(target), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    changed = [not np.allclose(b, np.asarray(w)) for b, w in zip(before, model.trainable_weights)]
    assert any(changed), "one fit step changed no weight"


def _assert_keras_round_trip(model, inputs):
    expected = keras.ops.convert_to_numpy(_first_output(model(inputs, training=False)))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        restored = keras.saving.load_model(path)
    actual = keras.ops.convert_to_numpy(_first_output(restored(inputs, training=False)))
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)
    return restored


def _build_from_shapes(layer, shapes):
    parameters = list(inspect.signature(layer.build).parameters)
    if len(parameters) == 1:
        layer.build(next(iter(shapes.values())))
    else:
        layer.build(**{f"{name}_shape": shape for name, shape in shapes.items() if f"{name}_shape" in parameters})


def run_layer_test(
    layer_cls,
    init_kwargs,
    inputs,
    expected_output_shape,
    expected_num_trainable_weights,
    expected_num_params=None,
    call_kwargs=None,
    run_mixed_precision=True,
    run_training=True,
):
    """Put one layer through every check. `inputs` maps call-argument names to numpy arrays (batch first)."""
    call_kwargs = call_kwargs or {}

    # Config round-trip.
    layer = layer_cls(**init_kwargs)
    _assert_config_round_trip(layer, init_kwargs)

    # Symbolic call inside a functional model: builds the layer, gives the output shape.
    symbolic = _symbolic_inputs(inputs)
    outputs = layer(**symbolic, **call_kwargs)
    assert tuple(_first_output(outputs).shape[1:]) == tuple(expected_output_shape[1:])
    assert layer.built
    assert len(layer.trainable_weights) == expected_num_trainable_weights
    assert not layer.non_trainable_weights
    if expected_num_params is not None:
        assert layer.count_params() == expected_num_params
    model = keras.Model(symbolic, _first_output(outputs))

    # Eager call: same shape, finite, deterministic in inference.
    eager = keras.ops.convert_to_numpy(_first_output(layer(**inputs, **call_kwargs)))
    assert eager.shape == tuple(expected_output_shape)
    assert np.all(np.isfinite(eager))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model(inputs)), eager)

    # A fresh layer built explicitly from shapes has the same weights, shape for shape.
    explicit = layer_cls(**init_kwargs)
    _build_from_shapes(explicit, {name: value.shape for name, value in inputs.items()})
    assert [tuple(w.shape) for w in explicit.weights] == [tuple(w.shape) for w in layer.weights]

    # Save and reload: same outputs.
    _assert_keras_round_trip(model, inputs)

    # One training step moves the weights.
    if run_training:
        target = np.random.default_rng(0).normal(size=eager.shape).astype("float32")
        _assert_fit_step_trains(model, inputs, target)

    # Mixed precision: float32 variables, half-precision finite outputs.
    if run_mixed_precision:
        for policy in MIXED_POLICIES:
            mixed = layer_cls(**{**init_kwargs, "dtype": policy})
            out = _first_output(mixed(**inputs, **call_kwargs))
            assert keras.backend.standardize_dtype(out.dtype) == policy.split("_")[1]
            assert all(w.dtype == "float32" for w in mixed.weights)
            assert np.all(np.isfinite(keras.ops.convert_to_numpy(keras.ops.cast(out, "float32"))))
    return layer


def run_model_test(model_fn, init_kwargs, inputs, expected_output_shape, expected_num_params=None):
    """Put one model (a class or preset function returning a functional model) through every check."""
    model = model_fn(**init_kwargs)
    _assert_config_round_trip(model, {})
    if expected_num_params is not None:
        assert model.count_params() == expected_num_params

    outputs = keras.ops.convert_to_numpy(model(inputs, training=False))
    assert outputs.shape == tuple(expected_output_shape)
    assert outputs.dtype == np.float32
    assert np.all(np.isfinite(outputs))

    restored = _assert_keras_round_trip(model, inputs)
    assert restored.get_config() == model.get_config()

    rng = np.random.default_rng(0)
    labels = rng.integers(1, outputs.shape[-1], size=outputs.shape[:-1]).astype("int32")
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    dataset = tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(len(labels))
    before = [np.asarray(w).copy() for w in model.trainable_weights]
    history = model.fit(dataset, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert any(not np.allclose(b, np.asarray(w)) for b, w in zip(before, model.trainable_weights))

    for policy in MIXED_POLICIES:
        mixed = model_fn(**{**init_kwargs, "dtype": policy})
        logits = keras.ops.convert_to_numpy(mixed(inputs, training=False))
        assert logits.dtype == np.float32, f"logits under {policy} are {logits.dtype}, not float32"
        assert np.all(np.isfinite(logits))
    return model


def jacobian(fn, x):
    """d fn(x) / d x as a numpy array of shape fn(x).shape + x.shape, on whichever backend Keras runs."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        x = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.jacobian(y, x).numpy()
    if backend == "jax":
        import jax

        fn(x)  # builds any unbuilt layer outside the trace
        return np.asarray(jax.jacobian(fn)(jax.numpy.asarray(x)))
    raise NotImplementedError(f"jacobian() has no {backend} implementation")


def gradients(loss_fn, variables_fn):
    """d loss_fn() / d each of variables_fn() (a list of Keras variables), as numpy arrays.

    loss_fn takes no argument and returns a scalar; variables_fn is called after loss_fn has run once, so layers
    that loss_fn builds have their variables by then.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        with tf.GradientTape() as tape:
            loss = loss_fn()
        return [g.numpy() for g in tape.gradient(loss, variables_fn())]
    if backend == "jax":
        import jax

        loss_fn()
        variables = variables_fn()

        def stateless_loss(values):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return loss_fn()

        return [np.asarray(g) for g in jax.grad(stateless_loss)([v.value for v in variables])]
    raise NotImplementedError(f"gradients() has no {backend} implementation")
