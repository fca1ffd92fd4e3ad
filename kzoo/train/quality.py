"""Translation quality with sacrebleu: BLEU (13a tokenization, cased) and chrF on detokenized text."""

import sacrebleu


def translation_scores(hypotheses, references):
    """{"bleu": float, "chrf": float, "bleu_signature": str} for aligned lists of strings.

    Example:
    ```python
    scores = kzoo.train.translation_scores(["Ein Hund rennt am Strand."], ["Ein Hund rennt am Strand."])
    assert scores["bleu"] == 100.0 and scores["chrf"] == 100.0
    print(scores["bleu_signature"])  # sacrebleu's: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...
    ```
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references: they must align.")
    bleu = sacrebleu.metrics.BLEU()
    result = bleu.corpus_score(hypotheses, [references])
    chrf = sacrebleu.metrics.CHRF().corpus_score(hypotheses, [references])
    return {"bleu": round(result.score, 2), "chrf": round(chrf.score, 2), "bleu_signature": str(bleu.get_signature())}
