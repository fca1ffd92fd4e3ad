"""Outputs of kzoo's models on fixed weights and inputs, under whichever backend Keras runs: the TensorFlow/JAX
agreement test runs this file in a process of each backend and compares what they write.

    KERAS_BACKEND=jax python tests/backend_outputs.py OUT.npz
"""

import sys

import numpy as np


def set_weights_from_seed(model, seed):
    """Give every weight values drawn from one numpy generator, in the model's weight order (the same on every
    backend), so that no backend's random initialisers are involved."""
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(scale=0.2, size=w.shape).astype("float32") for w in model.weights])


def outputs():
    """A dict of numpy arrays: teacher-forced and cached decoder logits of a small Transformer, and a small BERT's
    sequence output, pooled output, masked-LM and next-sentence logits, with padding in play."""
    import keras

    import kzoo
    from kzoo.models import Bert, BertPretrainer, Transformer

    keras.utils.set_random_seed(0)
    transformer = Transformer(
        source_vocabulary_size=50, target_vocabulary_size=40, num_encoder_layers=2, num_decoder_layers=2,
        hidden_dim=16, num_heads=2, intermediate_dim=32, max_sequence_length=16,
    )
    set_weights_from_seed(transformer, 1)
    encoder_ids = np.array([[5, 6, 7, 8, 0, 0], [9, 10, 11, 12, 13, 14]], "int32")
    decoder_ids = np.array([[1, 20, 21, 22, 0], [1, 22, 23, 24, 25]], "int32")
    results = {"transformer_logits": transformer({"encoder_token_ids": encoder_ids, "decoder_token_ids": decoder_ids})}

    u, padding_mask = transformer.encode(encoder_ids)
    cache = transformer.initial_cache(u, 5)
    steps = []
    for index in range(5):
        logits, cache = transformer.decode_step(decoder_ids[:, index : index + 1], index, cache, padding_mask)
        steps.append(keras.ops.convert_to_numpy(logits))
    results["transformer_cached_logits"] = np.concatenate(steps, axis=1)

    backbone = Bert(vocabulary_size=60, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                    max_sequence_length=12)
    pretrainer = BertPretrainer(backbone)
    set_weights_from_seed(pretrainer, 2)
    features = {
        "token_ids": np.array([[2, 11, 12, 3, 13, 14, 3, 0], [2, 15, 4, 17, 3, 18, 19, 3]], "int32"),
        "segment_ids": np.array([[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 1, 1, 1]], "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 1, 1, 1, 0], [1] * 8], "bool"),
    }
    for name, value in backbone(features).items():
        results[f"bert_{name}"] = value
    for name, value in pretrainer({**features, "masked_positions": np.array([[1, 4], [2, 5]], "int32")}).items():
        results[f"pretrainer_{name}"] = value
    results = {name: keras.ops.convert_to_numpy(value) for name, value in results.items()}
    results["backend"] = np.array(keras.backend.backend())
    assert kzoo  # the package imports under this backend
    return results


if __name__ == "__main__":
    np.savez(sys.argv[1], **outputs())
