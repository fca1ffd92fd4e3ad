"""`Translator` checks its decoding settings before any work, with the check `python -m kzoo.export` makes too."""

import pytest

from kzoo.translator import Translator, check_decoding


@pytest.mark.parametrize("settings, message", [
    ({"beam_size": 0}, "beam_size=0 must be a positive integer, such as 4"),
    ({"beam_size": "4"}, "beam_size='4' must be a positive integer"),
    ({"beam_size": True}, "beam_size=True must be a positive integer"),
    ({"length_penalty": -1.0}, r"length_penalty=-1.0 must be 0 or more \(0 scores plain log-probability\)"),
    ({"length_penalty": "0.6"}, "length_penalty='0.6' must be 0 or more"),
    ({"early_stopping": 1}, "early_stopping=1 must be True or False"),
    ({"jit_max_sentences": 6}, "jit_max_sentences=6 must be 0 or a power of two"),
    ({"lanes": 0}, "lanes=0 must be a positive integer"),
])
def test_translator_refuses_bad_settings_before_touching_the_model(settings, message):
    with pytest.raises(ValueError, match=message):
        Translator(model=None, tokenizer=None, **settings)  # no model: the check comes first


def test_every_problem_is_named_at_once():
    with pytest.raises(ValueError) as error:
        Translator(model=None, tokenizer=None, beam_size=0, length_penalty=-0.5, lanes=2)
    assert str(error.value) == ("beam_size=0 must be a positive integer, such as 4; length_penalty=-0.5 must be 0 or "
                                "more (0 scores plain log-probability), such as 0.6 or 1.0.")


def test_check_decoding_spells_settings_as_the_caller_asks():
    check_decoding(beam_size=5, length_penalty=0, early_stopping=True, jit_max_sentences=8, lanes=2)  # all fine
    with pytest.raises(ValueError, match="^--beam-size 0 must be a positive integer, such as 4.$"):
        check_decoding(spell=lambda name, value: f"--{name.replace('_', '-')} {value}", beam_size=0)
    with pytest.raises(TypeError, match=r"check_decoding got \['beam'\]"):
        check_decoding(beam=4)


def test_load_refuses_a_bad_override_before_reading_anything(tmp_path):
    with pytest.raises(ValueError, match="beam_size=0 must be a positive integer"):
        Translator.load(tmp_path / "nothing here", beam_size=0)  # the check, not FileNotFoundError: it comes first
