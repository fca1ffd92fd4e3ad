"""An exported translator whose small sub-batches decode compiled by XLA: its warm-up requests reach every compiled
shape, the contract loader replays them at load as TF Serving does, and it serves the dynamic export's strings."""

import json

import pytest

from kzoo.data import multi30k
from kzoo.export import export_translator
from kzoo.serving import ContractLoader, ServingError
from kzoo.serving.warmup import WARMUP_FILE, read_tfrecords, tfrecords
from kzoo.serving.wire_format import decode_tensor, field_value, logged_request, map_entries
from tests.tiny_translator import tiny_translator


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    compiled = tiny_translator(5, beam_size=3, max_source_length=20, jit_max_sentences=2)
    dynamic = tiny_translator(5, beam_size=3, max_source_length=20)
    return export_translator(compiled, folder / "compiled"), dynamic


def test_warmup_requests_reach_every_compiled_shape(exported):
    path, dynamic = exported
    requests = [logged_request(record) for record in read_tfrecords((path / "assets.extra" / WARMUP_FILE).read_bytes())]
    batches = []
    for request in requests:
        assert field_value(field_value(request, 1), 3) == b"serving_default"
        dtype, shape, texts = decode_tensor(map_entries(request, 2)["text"])
        batches.append((shape[0], len(dynamic.source_ids([texts[0].decode()])[0])))
    # 1 and 2 sentences, times sources of 16 and 20 tokens (the padded buckets 16 and 32)
    assert batches == [(1, 16), (1, 20), (2, 16), (2, 20)]
    settings = json.loads((path / "assets.extra" / "translator.json").read_text())["settings"]
    assert settings["jit_max_sentences"] == 2


def test_the_contract_loader_replays_them_and_serves_the_dynamic_strings(exported):
    path, dynamic = exported
    english, _ = multi30k("val")
    with ContractLoader(path) as served:
        assert served.warmup["requests"] == 4
        for batch in (english[:1], english[1:3], english[3:10]):  # compiled, compiled, dynamic and compiled
            assert served.rest({"instances": batch})["predictions"] == dynamic(batch)
        assert served.audit().ok  # XLA's function library holds TensorFlow core ops only


def test_a_corrupted_or_failing_warmup_file_fails_the_load(exported, tmp_path):
    import shutil

    path, _ = exported
    copy = shutil.copytree(path, tmp_path / "1")
    warmup = copy / "assets.extra" / WARMUP_FILE
    warmup.write_bytes(warmup.read_bytes()[:-1])
    with pytest.raises(ServingError, match="cut short"):
        ContractLoader(copy)
    from kzoo.serving.wire_format import predict_request, prediction_log

    warmup.write_bytes(tfrecords([prediction_log(predict_request({"words": ("string", [1], [b"A dog."])}))]))
    with pytest.raises(ServingError, match="warm-up request 0 .* failed: inputs \\['words'\\] do not match"):
        ContractLoader(copy)


@pytest.mark.parametrize("argv, message", [
    (["--checkpoint", "c", "--jit-max-sentences", "8"], "--jit-max-sentences apply to translation runs"),
    (["--run", "r", "--jit-max-sentences", "3"], "--jit-max-sentences 3 must be 0 or a power of two"),
    (["--checkpoint", "c", "--lanes", "2"], "--lanes apply to translation runs"),
    (["--run", "r", "--lanes", "0"], "--lanes 0 must be a positive integer"),
])
def test_the_cli_refuses_jit_max_sentences_and_lanes_where_they_cannot_apply(argv, message, capsys):
    from kzoo.export.__main__ import main

    with pytest.raises(SystemExit):
        main([*argv, "--output", "models"])
    assert message in capsys.readouterr().err


def test_a_two_lane_export_warms_each_lane_and_serves_the_same_strings_on_tf_serving_s_threads(tmp_path):
    # TF Serving run as README says for such a version: one intra-op thread, an inter-op thread per lane
    path = export_translator(tiny_translator(5, beam_size=3, max_source_length=20, jit_max_sentences=2, lanes=2),
                             tmp_path)
    requests = [logged_request(record) for record in read_tfrecords((path / "assets.extra" / WARMUP_FILE).read_bytes())]
    assert [decode_tensor(map_entries(request, 2)["text"])[1][0] for request in requests] == [2, 2, 4, 4]
    dynamic = tiny_translator(5, beam_size=3, max_source_length=20)
    english, _ = multi30k("val")
    with ContractLoader(path, intra_op_parallelism=1, inter_op_parallelism=2) as served:
        for batch in (english[:1], english[1:4], english[4:14]):  # one lane idle, both compiled, both dynamic
            assert served.rest({"instances": batch})["predictions"] == dynamic(batch)

