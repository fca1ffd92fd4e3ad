"""Named Transformer configurations. Each returns a freshly initialised `Transformer`; keyword overrides win."""

from kzoo.models.transformer import Transformer

# Vaswani et al. 2017, Table 3: base and big, with the ~37,000-token shared BPE vocabulary of WMT14 En-De.
PAPER_VOCABULARY_SIZE = 37000

BASE = dict(
    num_encoder_layers=6, num_decoder_layers=6, hidden_dim=512, num_heads=8, intermediate_dim=2048, dropout=0.1
)
BIG = dict(
    num_encoder_layers=6, num_decoder_layers=6, hidden_dim=1024, num_heads=16, intermediate_dim=4096, dropout=0.3
)
# Sized for Multi30k (29k sentence pairs, a few thousand subwords a language) on a CPU: 3+3 blocks, d_model 256.
SMALL = dict(
    num_encoder_layers=3, num_decoder_layers=3, hidden_dim=256, num_heads=4, intermediate_dim=1024, dropout=0.1
)


def _build(preset, vocabulary_size, overrides):
    config = dict(preset)
    shared = "target_vocabulary_size" not in overrides
    config.update(share_embeddings=shared, tie_output_embedding=True)
    config.update(overrides)
    return Transformer(source_vocabulary_size=vocabulary_size, **config)


def transformer_base(vocabulary_size=PAPER_VOCABULARY_SIZE, **overrides):
    """The paper's base model: 6+6 blocks, d_model 512, 8 heads, d_ff 2048, dropout 0.1; shared, tied embeddings.

    With the default 37,000-token shared vocabulary it has 63.1M parameters (the paper rounds its count to 65M).
    Pass `target_vocabulary_size=` for separate source and target vocabularies (embeddings then unshared), and any
    other `Transformer` argument to override the preset.

    Example:
    ```python
    # 6+6 blocks in the paper; 1+1 here keep the example small
    model = kzoo.models.transformer_base(vocabulary_size=1000, num_encoder_layers=1, num_decoder_layers=1)
    logits = model({"encoder_token_ids": np.array([[5, 6, 7, 0]]), "decoder_token_ids": np.array([[1, 9, 0]])})
    assert logits.shape == (1, 3, 1000) and model.get_config()["hidden_dim"] == 512
    ```
    """
    return _build(BASE, vocabulary_size, overrides)


def transformer_big(vocabulary_size=PAPER_VOCABULARY_SIZE, **overrides):
    """The paper's big model: 6+6 blocks, d_model 1024, 16 heads, d_ff 4096, dropout 0.3 (214M parameters).

    Example:
    ```python
    # 6+6 blocks in the paper; 1+1 here keep the example small
    config = kzoo.models.transformer_big(vocabulary_size=1000, num_encoder_layers=1, num_decoder_layers=1).get_config()
    assert (config["hidden_dim"], config["num_heads"], config["intermediate_dim"], config["dropout"]) == (
        1024, 16, 4096, 0.3)
    ```
    """
    return _build(BIG, vocabulary_size, overrides)


def transformer_small(vocabulary_size=8000, **overrides):
    """A small Transformer for Multi30k-sized data on a CPU: 3+3 blocks, d_model 256, 4 heads, d_ff 1024.

    Example:
    ```python
    model = kzoo.models.transformer_small(vocabulary_size=1000)
    logits = model({"encoder_token_ids": np.array([[5, 6, 7, 0]]), "decoder_token_ids": np.array([[1, 9, 0]])})
    assert logits.shape == (1, 3, 1000)  # float32 logits over the shared vocabulary
    ```
    """
    return _build(SMALL, vocabulary_size, overrides)
