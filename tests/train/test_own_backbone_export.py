"""kzoo's own path end to end (#17): pretrain a tiny BERT on WikiText-2 with kzoo's vocabulary, fine-tune it on SST-2,
export the run with `python -m kzoo.export --run`, and check the export against TF Serving's contract; all through
the one BERT text pipeline, so the export tokenizes exactly as pretraining and fine-tuning did."""

import itertools
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.data.wikitext import wikitext2_file, wikitext_documents
from kzoo.export.__main__ import main as export_main
from kzoo.serving import ContractLoader, read_rest_response, rest_request
from kzoo.serving.check import check_contract
from kzoo.train import bert_finetuning_recipe, bert_pretraining_recipe
from kzoo.train.bert_finetuning_recipe import FinetuningConfig
from kzoo.train.bert_pretraining_recipe import PretrainingConfig

ARTICLES = list(itertools.islice(wikitext_documents(wikitext2_file("valid")), 6))
TEXTS = ["A gripping, moving film.", "", "the plot is a dull , tired mess . " * 8]


@pytest.fixture(scope="module")
def fine_tuned(tmp_path_factory):
    root = tmp_path_factory.mktemp("own_backbone")
    pretraining = PretrainingConfig(preset="bert_tiny", sequence_length=32, batch_size=8, max_predictions=4,
                                    train_steps=2, steps_per_epoch=2, validation_batches=1)
    bert_pretraining_recipe.train(pretraining, root / "pretraining", verbose=0,
                                  train_documents=lambda: ARTICLES[2:], validation_documents=lambda: ARTICLES[:2])
    finetuning = FinetuningConfig(task="sst2", backbone=str(root / "pretraining"), sequence_length=32, batch_size=8,
                                  train_steps=2, epochs=1, train_examples=16, dev_examples=8)
    bert_finetuning_recipe.train(finetuning, root / "sst2", verbose=0)
    return root


def test_a_run_fine_tuned_from_kzoos_own_backbone_exports_and_serves(fine_tuned, tmp_path):
    run = fine_tuned / "sst2"
    assert json.loads((run / "config.json").read_text())["vocabulary"] == "kzoo:wikitext2/vocab.txt"
    assert (run / "vocab.txt").read_text() == (fine_tuned / "pretraining" / "vocab.txt").read_text()
    export_main(["--run", str(run), "--output", str(tmp_path / "sst2")])
    classifier = keras.saving.load_model(run / "classifier.keras", compile=False)
    assert classifier.preprocessor.sequence_length == 32 and classifier.preprocessor.lowercase
    expected = tf.nn.softmax(classifier.predict(TEXTS, verbose=0)).numpy()
    with ContractLoader(tmp_path / "sst2" / "1") as served:
        response = read_rest_response(served.rest(rest_request({"text": TEXTS})))
    np.testing.assert_allclose(response["probabilities"], expected, atol=1e-5)
    assert response["label"] == [["negative", "positive"][i] for i in expected.argmax(-1)]
    assert check_contract(tmp_path / "sst2" / "1") == []


def test_an_export_longer_than_the_backbones_positions_is_refused(tmp_path):
    # #19 item 5: the tiny checkpoint has 32 positions; 64 would fail at serving time for every long request.
    from tests.models.tiny_text_checkpoint import tiny_checkpoint

    checkpoint = tiny_checkpoint(tmp_path / "tiny")
    with pytest.raises(ValueError, match="sequence_length=64 is longer than the 32 positions of .*tiny; use 32"):
        export_main(["--checkpoint", str(checkpoint), "--output", str(tmp_path / "embedder"),
                     "--sequence-length", "64"])
    assert not (tmp_path / "embedder").exists()  # refused before anything was written
