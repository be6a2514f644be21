"""Scaled dot-product attention and multi-head attention (paper, section 3.2).

Notation for shape comments throughout minitrans:
    B batch, S source length, T target length, L any key length, D d_model,
    H heads, Dh head dim (d_k = d_v = D / H), V vocabulary.

Masks are boolean, True = may attend (see :mod:`minitrans.model.masks`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from minitrans.model.cache import AttentionCache


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout: float = 0.0
) -> tuple[Tensor, Tensor]:
    """``softmax(Q Kᵀ / √d_k) V``, written out (equation 1 of the paper).

    This explicit version is the reference that the fast path is tested against, and the
    one that returns attention weights.

    Args:
        q: Queries (..., L_q, d_k).
        k: Keys (..., L_k, d_k).
        v: Values (..., L_k, d_v).
        mask: Optional bool mask broadcastable to (..., L_q, L_k); True = may attend.
        dropout: Dropout probability on the weights (used in training only).

    Returns:
        ``(output, weights)``: (..., L_q, d_v) and (..., L_q, L_k). Masked positions get
        weight exactly 0. A query whose keys are all masked gets all-zero weights and a
        zero output instead of NaN.
    """
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)  # (..., L_q, L_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    # Subtract the row maximum so exp() cannot overflow; a fully masked row has max -inf,
    # which we replace by 0 so that the row becomes exp(-inf) = 0 rather than NaN.
    row_max = scores.amax(dim=-1, keepdim=True).detach()
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exp = torch.exp(scores - row_max)
    weights = exp / exp.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(exp.dtype).tiny)
    if dropout > 0.0:
        weights = F.dropout(weights, p=dropout)
    return torch.matmul(weights, v), weights  # (..., L_q, d_v), (..., L_q, L_k)


def _ungroup(x: Tensor, beams: int, t: int) -> Tensor:
    """(B/K, H, K*T, X) -> (B, H, T, X): per-sentence results back to one row per beam."""
    n, h, _, last = x.shape
    return x.view(n, h, beams, t, last).transpose(1, 2).reshape(n * beams, h, t, last)


class MultiHeadAttention(nn.Module):
    """``MultiHead(Q, K, V) = Concat(head_1..head_h) W^O`` (paper, section 3.2.2).

    Used as encoder self-attention, masked decoder self-attention and encoder–decoder
    (cross) attention. Two numerically equivalent paths:

    * the explicit :func:`scaled_dot_product_attention` (reference; returns weights);
    * :func:`torch.nn.functional.scaled_dot_product_attention` (fused kernels).

    Args:
        d_model: Model width D.
        n_heads: Number of heads H; D must be divisible by H.
        dropout: Dropout on attention weights.
        use_fused: ``True``/``False`` force the fused/explicit path when weights are not
            needed; ``None`` (auto) takes the fused kernel on GPUs and, without gradients
            (translation, validation), on CPUs; training on a CPU takes the explicit path,
            which trains faster there at sentence lengths (PyTorch's CPU flash-attention
            backward is the largest single cost of the fused step: docs/speed.md, "Training").

    A decoder attaches its speed-ups from the decoding side (:mod:`minitrans.decoding.kernels`).
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, use_fused: bool | None = None) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads}).")
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.dropout = dropout
        self.use_fused = use_fused
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _split_heads(self, x: Tensor) -> Tensor:
        b, length, _ = x.shape
        return x.view(b, length, self.n_heads, self.d_k).transpose(1, 2)  # (B, H, L, Dh)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values split into heads: (B, H, T, Dh), (B, H, L, Dh), (B, H, L, Dh)."""
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        return self._split_heads(q), self._split_heads(k), self._split_heads(v)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
                need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """Each head's ``softmax(Q Kᵀ / √d_k) V``: explicit when weights are asked for (or when
        ``use_fused`` says so), else PyTorch's fused kernel. ``(out, weights or None)``."""
        p = self.dropout if self.training else 0.0
        fused = self.use_fused if self.use_fused is not None else (q.device.type != "cpu" or not torch.is_grad_enabled())
        if need_weights or not fused:
            out, weights = scaled_dot_product_attention(q.to(k.dtype), k, v, mask, dropout=p)
            return out, weights if need_weights else None
        return F.scaled_dot_product_attention(q.to(k.dtype), k, v, attn_mask=mask, dropout_p=p), None

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        cache: AttentionCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` positions to ``key``/``value`` positions.

        Args:
            query: (B, T, D).
            key: (B, L, D). Ignored when a static cache is already filled.
            value: (B, L, D). Ignored likewise.
            mask: Bool, broadcastable to (B, H, T, L_total), True = may attend, where
                L_total counts cached positions too.
            cache: For incremental decoding. A growing (self-attention) cache gets this
                call's keys/values appended; a static (cross-attention) cache is filled
                on first use and reused afterwards.
            need_weights: Return the per-head attention weights (forces the explicit path).

        Returns:
            ``(output (B, T, D), weights (B, H, T, L_total) or None)``.
        """
        b, t, d = query.shape
        beams = 1
        if cache is not None and cache.static and cache.key is not None:
            k, v = cache.key, cache.value  # (B', H, S, Dh), computed at an earlier step
            beams = cache.beams
            q = self._split_heads(self.q_proj(query))  # (B, H, T, Dh)
        else:
            q, k, v = self._project(query, key, value)  # (B, H, T, Dh), (B', H, L, Dh) twice
            if cache is not None and cache.static:
                cache.store(k, v)
                k, v = cache.key, cache.value  # its contiguous copies (in its number format) serve this step too
                beams = cache.beams
            elif cache is not None:
                k, v = cache.append(k, v)  # (B, H, L_cached + L, Dh)
        if beams > 1:  # the K beams of a sentence query its one key row together
            q = q.view(b // beams, beams, self.n_heads, t, self.d_k).transpose(1, 2)  # (B/K, H, K, T, Dh)
            q = q.reshape(b // beams, self.n_heads, beams * t, self.d_k)  # (B/K, H, K*T, Dh)
        out, weights = self._attend(q, k, v, mask, need_weights)  # (B, H, T, Dh), (B, H, T, L_total) or None
        if beams > 1:  # back to one row per beam: (B/K, H, K*T, ·) -> (B, H, T, ·)
            out = _ungroup(out, beams, t)
            weights = _ungroup(weights, beams, t) if weights is not None else None
        out = out.transpose(1, 2).reshape(b, t, d).to(query.dtype)  # (B, T, D)
        return self.out_proj(out), weights
