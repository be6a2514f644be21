"""The encoder: a stack of N identical :class:`EncoderLayer` (section 3.1)."""

from __future__ import annotations

from torch import Tensor, nn

from minitrans.model.config import ModelConfig
from minitrans.model.layers import EncoderLayer, final_norm, stack


class Encoder(nn.Module):
    """N encoder layers; with pre-norm a final LayerNorm normalises the output."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = stack(EncoderLayer, config, config.n_encoder_layers)
        self.final_norm = final_norm(config)

    def forward(self, x: Tensor, src_mask: Tensor | None) -> Tensor:
        """Embedded source (B, S, D) and mask (B, 1, 1, S) -> memory (B, S, D)."""
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.final_norm(x) if self.final_norm is not None else x
