"""`python -m kzoo.export` turns a fine-tuning run into a classifier and a checkpoint into an embedder, both served
as TF Serving loads them."""

import json
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.export import sentence_embedding
from kzoo.export.__main__ import main
from kzoo.models import Bert, BertClassifier
from kzoo.serving import ContractLoader, read_rest_response, rest_request
from kzoo.serving.check import check_contract
from kzoo.text.bert_preprocessor import BertPreprocessor
from kzoo.train.run import Run

TINY = "tests/data/bert_checkpoint_reference/tiny_bert_for_pretraining"  # 64-token vocabulary, hidden 32
TEXTS = ["The cat sat.", "", "a dog ran on the mat " * 10]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("checkpoint") / "tiny"
    shutil.copytree(TINY, folder, ignore=shutil.ignore_patterns("pytorch_model.bin"))
    words = ["the", "cat", "sat", "a", "dog", "ran", "on", "mat", ".", "##s"]
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    filler = [f"[unused{i}]" for i in range(64 - len(special) - len(words))]
    (folder / "vocab.txt").write_text("\n".join(special + words + filler) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    return folder


def fine_tuning_run(folder, checkpoint, task, num_classes, tokenizer_checkpoint=None):
    keras.utils.set_random_seed(0)
    config = {"task": task, "checkpoint": str(checkpoint if tokenizer_checkpoint is None else tokenizer_checkpoint),
              "sequence_length": 16}
    with Run(folder, "kzoo.train.bert_finetuning_recipe", config):
        BertClassifier(Bert.from_checkpoint(checkpoint), num_classes=num_classes).save(folder / "classifier.keras")
    return folder


@pytest.mark.parametrize("task,labels", [("sst2", ["negative", "positive"]), ("mrpc", ["not_equivalent",
                                                                                   "equivalent"])])
def test_a_fine_tuning_run_exports_as_a_raw_text_classifier(tmp_path, checkpoint, task, labels):
    run = fine_tuning_run(tmp_path / "run", checkpoint, task, 2)
    main(["--run", str(run), "--output", str(tmp_path / task)])
    classifier = keras.saving.load_model(run / "classifier.keras", compile=False)
    preprocessor = BertPreprocessor.from_checkpoint(checkpoint, sequence_length=16)
    inputs = {"text": TEXTS} if task == "sst2" else {"text": TEXTS, "text_pair": TEXTS[::-1]}
    expected = tf.nn.softmax(classifier(preprocessor(*inputs.values()), training=False)).numpy()
    with ContractLoader(tmp_path / task / "1") as served:
        assert sorted(served.signatures["serving_default"]["inputs"]) == sorted(inputs)
        response = read_rest_response(served.rest(rest_request(inputs)))
    np.testing.assert_allclose(response["probabilities"], expected, atol=1e-5)
    assert response["label"] == [labels[i] for i in expected.argmax(-1)]
    assert check_contract(tmp_path / task / "1") == []


def test_a_checkpoint_exports_as_a_sentence_embedder(tmp_path, checkpoint):
    main(["--checkpoint", str(checkpoint), "--output", str(tmp_path / "embedder"), "--sequence-length", "16"])
    preprocessor = BertPreprocessor.from_checkpoint(checkpoint, sequence_length=16)
    expected = sentence_embedding(Bert.from_checkpoint(checkpoint), preprocessor(TEXTS)).numpy()
    with ContractLoader(tmp_path / "embedder" / "1") as served:
        response = read_rest_response(served.rest(rest_request({"text": TEXTS})), output_name="embedding")
    np.testing.assert_allclose(response["embedding"], expected, atol=1e-5)
    assert np.asarray(response["embedding"]).shape == (3, 32)


def test_a_run_without_a_checkpoint_tokenizer_is_refused_clearly(tmp_path, checkpoint):
    run = fine_tuning_run(tmp_path / "run", checkpoint, "sst2", 2, tokenizer_checkpoint="")
    with pytest.raises(ValueError, match="export it from Python with kzoo.export.export_classifier"):
        main(["--run", str(run), "--output", str(tmp_path / "out")])
    with pytest.raises(SystemExit):
        main(["--output", str(tmp_path / "out")])
