import gzip
import shutil

import pytest

from kzoo.data.shipped import shipped_file
from kzoo.data.wikitext import clean_wikitext, wikitext2_file, wikitext_documents
from kzoo.text.sentences import split_sentences


@pytest.fixture(scope="module")
def valid_documents():
    return list(wikitext_documents(wikitext2_file("valid")))


def test_shipped_splits_have_the_published_article_counts(valid_documents):
    # Merity et al. (2016), Table 1: WikiText-2 has 600 train, 60 valid and 60 test articles.
    train = list(wikitext_documents(wikitext2_file("train")))
    assert len(train) == 600 and len(valid_documents) == 60
    assert sum(len(document) for document in train) == 17585  # paragraphs, headings dropped
    assert train[0][0].startswith("Senjō no Valkyria 3 : [UNK] Chronicles ( Japanese :")
    assert train[-1][-1].startswith("Common starlings are trapped for food in some Mediterranean countries .")
    assert valid_documents[0][0].startswith("Homarus gammarus , known as the European lobster")
    paragraphs = [p for document in train + valid_documents for p in document]
    assert not any(p.startswith("= =") or "@" in p or "<unk>" in p for p in paragraphs)


def test_artefacts_are_undone():
    assert clean_wikitext("2 @,@ 000 @-@ year @-@ old , 0 @.@ 7 kg <unk> bird") == "2,000-year-old , 0.7 kg [UNK] bird"
    assert clean_wikitext("in 1916 @,@") == "in 1916,"  # a mark at the end of a line (the file has a few)
    assert clean_wikitext("e @-@ mail@example") == "e-mail@example"


def test_titles_start_articles_and_headings_are_dropped(tmp_path):
    text = (
        " \n = First = \n \n Intro . \n \n = = Section = = \n \n Body <unk> . \n"
        " Key : Pld \n = Played , W = \n Wins \n \n = = = Sub = = = \n \n Tail . \n \n"
        " = Second = \n \n Only @-@ one . \n"
    )
    (tmp_path / "wiki.tokens").write_text(text, encoding="utf-8")
    with gzip.open(tmp_path / "wiki.tokens.gz", "wt", encoding="utf-8") as out:
        out.write(text)
    expected = [
        ["Intro .", "Body [UNK] .", "Key : Pld", "= Played , W =", "Wins", "Tail ."],  # a table row is no title
        ["Only-one ."],
    ]
    assert list(wikitext_documents(tmp_path / "wiki.tokens")) == expected
    assert list(wikitext_documents(tmp_path / "wiki.tokens.gz")) == expected


def test_sentences_of_real_paragraphs(valid_documents):
    assert split_sentences(valid_documents[0][0]) == [
        "Homarus gammarus , known as the European lobster or common lobster , is a species of [UNK] lobster from the "
        "eastern Atlantic Ocean , Mediterranean Sea and parts of the Black Sea .",
        "It is closely related to the American lobster , H. americanus .",  # "H. a" is no sentence end
        "It may grow to a length of 60 cm ( 24 in ) and a mass of 6 kilograms ( 13 lb ) , and bears a conspicuous "
        "pair of claws .",
        'In life , the lobsters are blue , only becoming " lobster red " on cooking .',
        "Mating occurs in the summer , producing eggs which are carried by the females for up to a year before "
        "hatching into [UNK] larvae .",
        "Homarus gammarus is a highly esteemed food , and is widely caught using lobster pots , mostly around the "
        "British Isles .",
    ]

    def paragraph(start):
        return next(p for document in valid_documents for p in document if p.startswith(start))

    # A spaced closing quote after the full stop stays with its sentence; an opening one starts the next.
    assert split_sentences(paragraph("Seven [UNK] , including a deputy"))[1:3] == [
        'It was the first time that a white jury had convicted " a white official in a civil rights killing . "',
        "In 2005 , the case was reopened by the state , which brought charges in the case for the first time .",
    ]
    assert split_sentences(paragraph('" I know why people [UNK] it'))[1:] == [
        "When they read the lyrics , there 's nothing I put in the lyrics that says necessarily he was a bad man , "
        "because to me – well , isn 't that obvious ?",
        'I shouldn \'t have to tell you that . "',
    ]


def test_sentences_of_ordinary_text():
    assert split_sentences('He said "Go." Then he left! Did he? Yes. 3 dogs ran. ok') == [
        'He said "Go."',
        "Then he left!",
        "Did he?",
        "Yes.",
        "3 dogs ran. ok",
    ]
    # Lowercase after the stop is no sentence end; an abbreviation before a capital is, a known limit of the rule.
    assert split_sentences("See e.g. this one. U.S. Army units.") == ["See e.g. this one.", "U.S.", "Army units."]
    assert split_sentences("  ") == []


def test_checksum_missing_file_and_bad_split_are_clear_errors(tmp_path):
    shutil.copy(shipped_file("wikitext2/wiki.valid.tokens.gz"), tmp_path)
    assert wikitext2_file("valid", data_dir=tmp_path) == tmp_path / "wiki.valid.tokens.gz"
    with open(tmp_path / "wiki.valid.tokens.gz", "ab") as out:
        out.write(b"\0")
    with pytest.raises(ValueError, match="does not have the sha256 of the shipped file"):
        wikitext2_file("valid", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="wiki.train.tokens.gz is missing"):
        wikitext2_file("train", data_dir=tmp_path)
    with pytest.raises(ValueError, match="split='test'"):
        wikitext2_file("test")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        next(wikitext_documents(tmp_path / "absent.tokens"))
