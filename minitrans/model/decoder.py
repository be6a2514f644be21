"""The decoder: a stack of N identical :class:`DecoderLayer` (section 3.1).

It runs teacher-forced over whole target prefixes (training) or incrementally, a few
positions at a time, over a :class:`~minitrans.model.cache.DecoderCache` (generation).
"""

from __future__ import annotations

from torch import Tensor, nn

from minitrans.model.cache import DecoderCache
from minitrans.model.config import ModelConfig
from minitrans.model.layers import DecoderLayer, final_norm, stack


class Decoder(nn.Module):
    """N decoder layers; with pre-norm a final LayerNorm normalises the output."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = stack(DecoderLayer, config, config.n_decoder_layers)
        self.final_norm = final_norm(config)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt_mask: Tensor | None,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, list[Tensor]]:
        """Embedded target (B, T, D) -> ``(states (B, T, D), per-layer cross-attention
        weights, each (B, H, T, S); empty unless need_weights)``."""
        all_weights = []
        for i, layer in enumerate(self.layers):
            x, weights = layer(x, memory, src_mask, tgt_mask,
                               cache.layers[i] if cache is not None else None, need_weights)
            if weights is not None:
                all_weights.append(weights)
        x = self.final_norm(x) if self.final_norm is not None else x
        return x, all_weights
