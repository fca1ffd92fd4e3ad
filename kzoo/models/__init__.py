"""Functional models built only from kzoo.layers."""

from kzoo.models.attention_map import attention_map
from kzoo.models.bert import Bert
from kzoo.models.bert_classifier import BertClassifier
from kzoo.models.bert_presets import bert_base, bert_large, bert_medium, bert_mini, bert_small, bert_tiny
from kzoo.models.bert_pretrainer import BertPretrainer
from kzoo.models.bert_question_answerer import BertQuestionAnswerer
from kzoo.models.bert_sentence_embedder import BertSentenceEmbedder
from kzoo.models.bert_token_classifier import BertTokenClassifier
from kzoo.models.transformer import Transformer
from kzoo.models.transformer_presets import transformer_base, transformer_big, transformer_small
