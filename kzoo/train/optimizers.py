"""AdamW with a learning rate scaled per variable, and the layer-wise decay of those scales for BERT."""

import re

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kzoo")
class LayerwiseAdamW(keras.optimizers.AdamW):
    """AdamW whose learning rate, and so its decoupled weight decay, is multiplied by a factor chosen per variable.

    A variable takes the factor of the first pattern in `learning_rate_multipliers` that `re.search` finds in its
    path (`variable.path`, e.g. "encoder_block_3/feed_forward/output_dense/kernel"), or 1 when none matches. With
    every factor 1 it is exactly `keras.optimizers.AdamW`. Keras optimizers take one learning rate for all variables
    (Keras 3 has no parameter groups), so the factor is applied in `update_step`, where Adam's step for one variable
    is taken; the weight decay, which AdamW takes for all variables at once with the unscaled rate, is taken there
    too, with the scaled rate, as Hugging Face's and ELECTRA's layer-wise decay do.

    Args:
        learning_rate_multipliers: dict of str to float. Regular expressions on variable paths, and the positive
            factor of each; see `bert_layer_decay`.
        **kwargs: `keras.optimizers.AdamW`'s arguments: `learning_rate` (a float or a schedule), `weight_decay`, ...

    Example:
    ```python
    multipliers = kzoo.train.bert_layer_decay(num_layers=6, decay=0.8)
    optimizer = kzoo.train.LayerwiseAdamW(learning_rate_multipliers=multipliers, learning_rate=1.5e-4,
                                          weight_decay=0.01)
    assert np.isclose(optimizer.multiplier("encoder_block_4/feed_forward/output_dense/kernel"), 0.8**2)
    assert optimizer.multiplier("classifier/kernel") == 1.0  # the head learns at the full rate
    ```
    """

    def __init__(self, learning_rate_multipliers=None, **kwargs):
        super().__init__(**kwargs)
        self.learning_rate_multipliers = dict(learning_rate_multipliers or {})
        for pattern, factor in self.learning_rate_multipliers.items():
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"learning_rate_multipliers pattern {pattern!r} is not a regular expression: "
                                 f"{error}.") from None
            if not factor > 0:
                raise ValueError(f"learning_rate_multipliers[{pattern!r}]={factor} must be positive; freeze a "
                                 "variable with `layer.trainable = False` instead.")
        self._multipliers = []

    def multiplier(self, path):
        """The learning-rate factor of the variable at `path`: the first matching pattern's, else 1.0."""
        for pattern, factor in self.learning_rate_multipliers.items():
            if re.search(pattern, path):
                return float(factor)
        return 1.0

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._multipliers = [self.multiplier(variable.path) for variable in var_list]

    def update_step(self, gradient, variable, learning_rate):
        multiplier = self._multipliers[self._get_variable_index(variable)]
        learning_rate = ops.cast(learning_rate, variable.dtype) * multiplier
        if self.weight_decay is not None and self._use_weight_decay(variable):
            weight_decay = ops.cast(self.weight_decay, variable.dtype)
            self.assign_sub(variable, variable * weight_decay * learning_rate)
        super().update_step(gradient, variable, learning_rate)

    def _apply_weight_decay(self, variables):
        """Nothing here: `update_step` decays each variable with its own scaled learning rate."""

    def get_config(self):
        return {**super().get_config(), "learning_rate_multipliers": self.learning_rate_multipliers}


def bert_layer_decay(num_layers, decay):
    """`LayerwiseAdamW` factors for layer-wise learning-rate decay on a kzoo `Bert` and the head on top of it.

    The head and the pooler keep the full learning rate; encoder block `i` (0 at the bottom) takes
    `decay ** (num_layers - i)` and the embeddings `decay ** (num_layers + 1)`, so each layer down learns `decay`
    times slower than the one above (Clark et al. 2020, ELECTRA, appendix A; Sun et al. 2019, "How to fine-tune BERT
    for text classification?").

    Args:
        num_layers: int. The backbone's encoder blocks (`Bert.num_layers`).
        decay: float in (0, 1]. 1 is no decay.

    Returns:
        dict of str to float: patterns on variable paths and their factors, for `LayerwiseAdamW`.

    Example:
    ```python
    multipliers = kzoo.train.bert_layer_decay(num_layers=2, decay=0.5)
    assert multipliers[r"(^|/)encoder_block_1/"] == 0.5 and multipliers[r"(^|/)encoder_block_0/"] == 0.25
    assert min(multipliers.values()) == 0.125  # the embeddings, one step below the lowest block
    ```
    """
    if not 0 < decay <= 1:
        raise ValueError(f"decay={decay} must be in (0, 1]: the factor between one layer's learning rate and the "
                         "next layer up's; 1 turns the decay off.")
    multipliers = {r"(^|/)(token_embedding|segment_embedding|position_embedding|embeddings_norm)/":
                   decay ** (num_layers + 1)}
    for i in range(num_layers):
        multipliers[rf"(^|/)encoder_block_{i}/"] = decay ** (num_layers - i)
    return multipliers
