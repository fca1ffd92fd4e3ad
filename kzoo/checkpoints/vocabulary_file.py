"""Reading a WordPiece vocab.txt, one token a line, with errors that name the file and what was expected."""

import io
import pathlib


def read_vocabulary(path):
    """The tokens of a vocab.txt, one a line, as transformers' `load_vocab` reads them (only the line's "\\n" is
    removed). A file that is not UTF-8 text, holds NUL bytes (a binary file), or holds no token is refused with a
    `ValueError` naming the file, the place and what a vocabulary must be.

    Example:
    ```python
    import pathlib
    from kzoo.checkpoints.vocabulary_file import read_vocabulary

    pathlib.Path("vocab.txt").write_text("[PAD]\\n[UNK]\\nthe\\n##s\\n")
    assert read_vocabulary("vocab.txt") == ["[PAD]", "[UNK]", "the", "##s"]
    pathlib.Path("vocab.txt").write_bytes(b"[PAD]\\n\\x89PNG\\r\\n")
    try:
        read_vocabulary("vocab.txt")
    except ValueError as error:
        assert "vocab.txt is not UTF-8 text (byte 0x89 at offset 6" in str(error)
    ```
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: expected a WordPiece vocabulary, one token a line.")
    data = path.read_bytes()
    expected = "expected a WordPiece vocabulary (vocab.txt), UTF-8 text with one token a line"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}): "
                         f"{expected}.") from None
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise ValueError(f"{path} holds a NUL byte on line {line}, so it is a binary file: {expected}.")
    lines = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")  # universal newlines, as open() reads the file
    tokens = [line.removesuffix("\n") for line in lines]
    if not any(tokens):
        raise ValueError(f"{path} holds no token: {expected}.")
    return tokens
