"""WikiText (Merity et al., 2016): Wikipedia articles streamed one at a time from a WikiText tokens file."""

import gzip
import hashlib
import itertools
import pathlib
import re

from kzoo.data.shipped import SHIPPED_DATA_DIR, SHIPPED_PREFIX, shipped_file

# kzoo ships the train and valid splits of WikiText-2 v1 and a vocabulary learned from them, as
# shipped_file("wikitext2") (see data/wikitext2/SOURCE.md); sha256 of each split.
WIKITEXT2_DIR = SHIPPED_DATA_DIR / "wikitext2"
# The shipped vocabulary as a run's config.json records it (kzoo.data.resolve_data_path opens it).
WIKITEXT2_VOCABULARY = f"{SHIPPED_PREFIX}wikitext2/vocab.txt"
WIKITEXT2_SHA256 = {
    "train": "0c202e0b5d919429261b7291d9b5998f0db680c0a6700c0ff2a886d0abe055d4",
    "valid": "3ac34ae2b6509075d52302c50a04a8a1970739ffe1a904f2cd374fefbea3cbf2",
}

# WikiText splits numbers and hyphenated words around "@-@", "@,@" and "@.@", and writes rare words as "<unk>"; the
# WordPiece tokenizers of kzoo.text.wordpiece read the literal text "[UNK]" as their unknown token.
_SPLIT_MARK = re.compile(r" @([-,.])@(?: |$)")
_TITLE = re.compile(r"= [^=].* =")
_HEADING = re.compile(r"=( =)+ .* =( =)+")


def clean_wikitext(line):
    """A WikiText line with the tokenization artefacts undone: `2 @,@ 000` → `2,000`, `<unk>` → `[UNK]`.

    Example:
    ```python
    from kzoo.data.wikitext import clean_wikitext

    assert clean_wikitext("It cost 2 @,@ 000 <unk> over 1 @.@ 5 years") == "It cost 2,000 [UNK] over 1.5 years"
    ```
    """
    return _SPLIT_MARK.sub(r"\1", line).replace("<unk>", "[UNK]")


def wikitext_documents(path):
    """Yield the articles of a WikiText tokens file (plain or .gz) one at a time, each a list of paragraph strings.

    An article starts at a title line ` = Title = ` that stands between two blank lines (table rows such as
    ` = Played , W = ` also look like titles but never stand alone). Titles and the ` = = Section = = ` headings are
    dropped, paragraphs are stripped and cleaned with `clean_wikitext`. Only one article is held in memory.

    Example:
    ```python
    import pathlib

    pathlib.Path("wiki.tokens").write_text(
        "\\n = Robert Boulter = \\n\\n Robert Boulter is an English actor . \\n\\n = = Career = = \\n\\n"
        " He won 2 @,@ 000 prizes . \\n", encoding="utf-8")
    articles = kzoo.data.wikitext_documents("wiki.tokens")
    assert list(articles) == [["Robert Boulter is an English actor .", "He won 2,000 prizes ."]]
    ```
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: pass a WikiText file such as wiki.train.tokens(.gz).")
    opener = gzip.open if path.suffix == ".gz" else open
    document = []
    with opener(path, "rt", encoding="utf-8", newline="\n") as handle:
        lines = (line.strip() for line in handle)
        previous, current = "", next(lines, "")
        for following in itertools.chain(lines, [""]):
            if not previous and not following and _TITLE.fullmatch(current):
                if document:
                    yield document
                document = []
            elif current and not _HEADING.fullmatch(current):
                document.append(clean_wikitext(current))
            previous, current = current, following
    if document:
        yield document


def wikitext2_file(split, data_dir=None):
    """The path of a shipped WikiText-2 split ("train" or "valid"), checked against its sha256.

    Example:
    ```python
    path = kzoo.data.wikitext2_file("valid")
    first = next(kzoo.data.wikitext_documents(path))  # the first article, a list of paragraphs
    assert path.name == "wiki.valid.tokens.gz" and first[0].startswith("Homarus gammarus , known as")
    ```
    """
    if split not in WIKITEXT2_SHA256:
        raise ValueError(f"split={split!r} is not a shipped WikiText-2 split; use one of {tuple(WIKITEXT2_SHA256)}.")
    path = (pathlib.Path(data_dir) if data_dir else shipped_file("wikitext2")) / f"wiki.{split}.tokens.gz"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: put the WikiText-2 v1 tokens files there, or pass data_dir=.")
    expected = WIKITEXT2_SHA256[split]
    if hashlib.sha256(path.read_bytes()).hexdigest() != expected:
        raise ValueError(f"{path} does not have the sha256 of the shipped file ({expected}); fetch it again.")
    return path

