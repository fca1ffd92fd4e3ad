"""Text to ids and back, as TensorFlow ops that can live inside an exported graph."""

from kzoo._lazy import lazy_namespace

__getattr__, __dir__ = lazy_namespace(__name__, {
    "END": "kzoo.text.subword_tokenizer",
    "PAD": "kzoo.text.subword_tokenizer",
    "START": "kzoo.text.subword_tokenizer",
    "UNKNOWN": "kzoo.text.subword_tokenizer",
    "SubwordTokenizer": "kzoo.text.subword_tokenizer",
    "encode_pairs": "kzoo.text.translation_data",
    "translation_batches": "kzoo.text.translation_data",
    "preprocessed_dataset": "kzoo.text.classification_batches",
    "split_sentences": "kzoo.text.sentences",
    "learn_wordpiece_vocabulary": "kzoo.text.wordpiece",
    "load_vocabulary": "kzoo.text.wordpiece",
    "save_vocabulary": "kzoo.text.wordpiece",
    "read_vocabulary": "kzoo.text.wordpiece",
    "text_dataset": "kzoo.text.task_inputs",
    "pretraining_dataset": "kzoo.text.pretraining_data",
    "BertPreprocessor": "kzoo.text.bert_preprocessor",
})
