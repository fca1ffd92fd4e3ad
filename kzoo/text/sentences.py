"""Sentence splitting by rule: enough for building BERT's next-sentence pairs from paragraphs."""

import re

# A sentence ends at . ! or ? (a closing quote or bracket may follow it directly) when whitespace and then an
# uppercase letter, a digit or an opening quote come next. "H. americanus" stays one sentence; "U.S. Army" does not.
_SENTENCE_BREAK = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)\]]))\s+(?=[\"'“‘A-Z0-9À-ÖØ-Þ])")


def split_sentences(paragraph):
    """The sentences of a paragraph, stripped, in order; an empty or blank paragraph has none.

    Text that spaces its quotes, as WikiText does (`he said . " Then`), cannot tell a closing quote from an opening
    one by its neighbours, so a quote that starts a piece while an odd number of quotes came before it in the
    paragraph is a closing quote and goes back to the end of the sentence before.

    Example:
    ```python
    from kzoo.text.sentences import split_sentences

    split_sentences('It is a lobster , H. americanus . It is blue . " Lobster red " on cooking .')
    # ['It is a lobster , H. americanus .', 'It is blue .', '" Lobster red " on cooking .']
    ```
    """
    sentences = []
    quotes = 0
    for piece in _SENTENCE_BREAK.split(paragraph.strip()):
        if sentences and quotes % 2 and piece.startswith('"'):
            sentences[-1] += ' "'
            quotes += 1
            piece = piece[1:].strip()
        quotes += piece.count('"')
        if piece:
            sentences.append(piece)
    return sentences
