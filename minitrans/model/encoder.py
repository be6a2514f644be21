"""The encoder: a stack of N identical :class:`EncoderLayer` (section 3.1)."""

from __future__ import annotations

from torch import Tensor, nn

from minitrans.model.config import ModelConfig
from minitrans.model.layers import EncoderLayer


class Encoder(nn.Module):
    """N encoder layers; with pre-norm a final LayerNorm normalises the output."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(config.d_model, config.n_heads, config.d_ff, config.dropout,
                         config.attention_dropout, config.norm_first, config.layer_norm_eps,
                         config.fused_attention)
            for _ in range(config.n_encoder_layers)
        )
        self.final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None

    def forward(self, x: Tensor, src_mask: Tensor | None) -> Tensor:
        """Embedded source (B, S, D) and mask (B, 1, 1, S) -> memory (B, S, D)."""
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.final_norm(x) if self.final_norm is not None else x
