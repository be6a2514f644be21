"""The building blocks of the paper's encoder and decoder layers (sections 3.1–3.5)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from minitrans.model.attention import MultiHeadAttention
from minitrans.model.cache import LayerCache
from minitrans.model.dropout import Dropout

if TYPE_CHECKING:
    from minitrans.model.config import ModelConfig


class PositionalEncoding(nn.Module):
    """Adds position information to embeddings, then applies dropout (section 3.5).

    Sinusoidal (the paper): ``PE(pos, 2i) = sin(pos / 10000^(2i/d_model))`` and
    ``PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))``; or learned position embeddings.

    Args:
        d_model: Model width D.
        max_len: Longest sequence covered.
        dropout: Dropout applied to ``embedding + position``.
        learned: Learn the position table instead of using sinusoids.
    """

    def __init__(self, d_model: int, max_len: int, dropout: float = 0.0, learned: bool = False) -> None:
        super().__init__()
        self.max_len = max_len
        self.dropout = Dropout(dropout)
        self.learned = nn.Embedding(max_len, d_model) if learned else None
        # A non-persistent buffer: derived from the formula, so never stored in checkpoints.
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """``x`` is (B, T, D); positions are ``offset .. offset+T-1`` (offset > 0 when decoding
        incrementally)."""
        t = x.size(1)
        if offset + t > self.max_len:
            raise ValueError(
                f"Sequence of {offset + t} positions exceeds the model's max_len ({self.max_len}); "
                "truncate the input or train with a larger ModelConfig.max_len."
            )
        if self.learned is not None:
            positions = torch.arange(offset, offset + t, device=x.device)
            pe = self.learned(positions)  # (T, D)
        else:
            pe = self.table[offset:offset + t]  # (T, D)
        return self.dropout(x + pe.to(x.dtype))


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """The (max_len, d_model) table of the paper's sinusoidal encodings."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    # 1 / 10000^(2i/d_model) for i = 0 .. d_model/2 - 1, computed in log space.
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return table


class FeedForward(nn.Module):
    """Position-wise feed-forward network ``max(0, x W1 + b1) W2 + b2`` (section 3.3)."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(torch.relu(self.linear1(x)))  # (B, L, D) -> (B, L, d_ff) -> (B, L, D)


class Residual(nn.Module):
    """Residual connection around a sublayer, with dropout and LayerNorm (section 5.4).

    Post-norm (the paper): ``LayerNorm(x + Dropout(Sublayer(x)))``.
    Pre-norm: ``x + Dropout(Sublayer(LayerNorm(x)))``; the stack then needs a final
    LayerNorm, which :class:`~minitrans.model.encoder.Encoder`/``Decoder`` add.
    """

    def __init__(self, d_model: int, dropout: float, norm_first: bool, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, sublayer) -> Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each inside a :class:`Residual`."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float,
                 attention_dropout: float = 0.0, norm_first: bool = False, eps: float = 1e-5,
                 fused_attention: bool | None = None) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout, fused_attention)
        self.feed_forward = FeedForward(d_model, d_ff)
        self.attn_block = Residual(d_model, dropout, norm_first, eps)
        self.ff_block = Residual(d_model, dropout, norm_first, eps)

    def forward(self, x: Tensor, src_mask: Tensor | None) -> Tensor:
        """``x`` (B, S, D), ``src_mask`` (B, 1, 1, S) -> (B, S, D)."""
        x = self.attn_block(x, lambda h: self.self_attn(h, h, h, src_mask)[0])
        return self.ff_block(x, self.feed_forward)


class DecoderLayer(nn.Module):
    """Masked self-attention, then cross-attention over the encoder output, then
    feed-forward, each inside a :class:`Residual` (section 3.1)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float,
                 attention_dropout: float = 0.0, norm_first: bool = False, eps: float = 1e-5,
                 fused_attention: bool | None = None) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout, fused_attention)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, attention_dropout, fused_attention)
        self.feed_forward = FeedForward(d_model, d_ff)
        self.self_block = Residual(d_model, dropout, norm_first, eps)
        self.cross_block = Residual(d_model, dropout, norm_first, eps)
        self.ff_block = Residual(d_model, dropout, norm_first, eps)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt_mask: Tensor | None,
        cache: LayerCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """One decoder layer.

        Args:
            x: Target states (B, T, D).
            memory: Encoder output (B, S, D).
            src_mask: (B, 1, 1, S), True = real source token.
            tgt_mask: Broadcastable to (B, H, T, T_total): causal and target padding.
            cache: This layer's key/value caches when decoding incrementally.
            need_weights: Also return the cross-attention weights.

        Returns:
            ``(x (B, T, D), cross-attention weights (B, H, T, S) or None)``.
        """
        self_cache = cache.self_attn if cache is not None else None
        cross_cache = cache.cross_attn if cache is not None else None
        x = self.self_block(x, lambda h: self.self_attn(h, h, h, tgt_mask, self_cache)[0])
        weights = None

        def cross(h: Tensor) -> Tensor:
            nonlocal weights
            out, weights = self.cross_attn(h, memory, memory, src_mask, cross_cache, need_weights)
            return out

        x = self.cross_block(x, cross)
        return self.ff_block(x, self.feed_forward), weights


def stack(layer: type[nn.Module], config: ModelConfig, n: int) -> nn.ModuleList:
    """``n`` identical layers of class ``layer`` (:class:`EncoderLayer` or :class:`DecoderLayer`)
    with ``config``'s sizes (a :class:`~minitrans.model.config.ModelConfig`): section 3.1's
    "a stack of N = 6 identical layers", for either side."""
    return nn.ModuleList(layer(config.d_model, config.n_heads, config.d_ff, config.dropout, config.attention_dropout,
                               config.norm_first, config.layer_norm_eps, config.fused_attention) for _ in range(n))


def final_norm(config: ModelConfig) -> nn.LayerNorm | None:
    """The LayerNorm after a pre-norm stack (its layers leave the residual stream unnormalised);
    None for the paper's post-norm."""
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
