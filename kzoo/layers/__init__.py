"""The lecture's building blocks, one class per file."""

from kzoo.layers.activations import gelu_approximate
from kzoo.layers.attention import Attention
from kzoo.layers.decoder_block import DecoderBlock
from kzoo.layers.encoder_block import EncoderBlock
from kzoo.layers.feed_forward import FeedForward
from kzoo.layers.masked_lm_head import MaskedLMHead
from kzoo.layers.mean_pooling import MeanPooling
from kzoo.layers.multi_head import MultiHead
from kzoo.layers.position_embedding import PositionEmbedding
from kzoo.layers.self_attention import SelfAttention
from kzoo.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from kzoo.layers.token_embedding import TokenEmbedding
