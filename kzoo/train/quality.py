"""Translation quality with sacrebleu: BLEU (13a tokenization, cased, and lowercased to compare with papers that
lowercase) and chrF on detokenized text."""

import sacrebleu


def translation_scores(hypotheses, references):
    """{"bleu": float, "bleu_lowercase": float, "chrf": float, "bleu_signature": str} for aligned lists of strings.

    "bleu" is cased sacreBLEU (the score kzoo reports and chooses by); "bleu_lowercase" is the same with both sides
    lowercased, the form much of the Multi30k literature quotes.

    Example:
    ```python
    scores = kzoo.train.translation_scores(["Ein Hund rennt am Strand."], ["Ein Hund rennt am Strand."])
    assert scores["bleu"] == 100.0 and scores["chrf"] == 100.0
    lowered = kzoo.train.translation_scores(["ein Hund rennt am Strand."], ["Ein Hund rennt am Strand."])
    assert lowered["bleu_lowercase"] == 100.0 > lowered["bleu"]
    print(scores["bleu_signature"])  # sacrebleu's: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...
    ```
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references: they must align.")
    bleu = sacrebleu.metrics.BLEU()
    result = bleu.corpus_score(hypotheses, [references])
    lowercase = sacrebleu.metrics.BLEU(lowercase=True).corpus_score(hypotheses, [references])
    chrf = sacrebleu.metrics.CHRF().corpus_score(hypotheses, [references])
    return {"bleu": round(result.score, 2), "bleu_lowercase": round(lowercase.score, 2), "chrf": round(chrf.score, 2),
            "bleu_signature": str(bleu.get_signature())}
