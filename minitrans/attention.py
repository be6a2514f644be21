"""Scaled dot-product attention and multi-head attention (paper, section 3.2).

Notation for shape comments throughout minitrans:
    B batch, S source length, T target length, L any key length, D d_model,
    H heads, Dh head dim (d_k = d_v = D / H), V vocabulary.

Masks are boolean, True = may attend (see :mod:`minitrans.masks`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from minitrans.cache import AttentionCache


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


#: Rows shorter than this are softmaxed by hand in :func:`inference_attention`: PyTorch's CPU
#: softmax takes a scalar loop below one AVX-512 vector of float32 (16), 5x slower than
#: ``amax``, ``exp`` and a division at 14 keys (291 against 57 µs for 1,712 rows on one thread,
#: 2.9x on two; ``python bench/decode_ops.py``).
SHORT_ROWS = 16


def inference_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    """``softmax(Q Kᵀ / √d_k) V`` for bf16 inference on a CPU: the formula, lean.

    :func:`scaled_dot_product_attention` with only what inference needs: two batched products
    in the keys' number format, the scale, the mask and a float32 softmax. A decoding step has
    one query (or the K beam queries of a sentence) per row against a few dozen keys, and
    PyTorch's fused CPU kernel runs such problems 2.6-4.9x slower than this in bf16 (measured on
    an AVX-512-BF16 CPU without AMX; ``python bench/decode_ops.py``).

    Args:
        q: Queries (..., L_q, d_k), converted to the keys' dtype (the search keeps a bf16
            model's keys and values in float32: :func:`minitrans.search.cache_dtype`).
        k, v: Keys and values (..., L_k, d_k), one dtype.
        mask: Bool, broadcastable to (..., L_q, L_k); True = may attend.

    Returns:
        (..., L_q, d_v) in the values' dtype. A query with every key masked gets the mean of
        the values (the lowest finite score everywhere), not the reference's zeros; decoding
        never makes one (every source keeps its eos, and a query sees itself).
    """
    scores = torch.matmul(q.to(k.dtype), k.transpose(-2, -1)).float().mul_(q.size(-1) ** -0.5)  # (..., L_q, L_k)
    if mask is not None:
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    if scores.size(-1) < SHORT_ROWS:  # PyTorch's CPU softmax loops element by element on short rows
        weights = scores.sub_(scores.amax(dim=-1, keepdim=True)).exp_()
        weights = weights.div_(weights.sum(dim=-1, keepdim=True))
    else:
        weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights.to(v.dtype), v)  # (..., L_q, d_v)


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
            needed; ``None`` (auto) takes the fused kernel on GPUs and the explicit path on
            CPUs, where it trains 1.47x faster at sentence lengths (bf16 autocast, d_model 256,
            Multi30k batches, ``bench/benchmark_train.py``: PyTorch's CPU flash-attention
            backward is the largest single cost of the fused step). Without gradients
            (translation, validation) a CPU takes the fused kernel for float32 (one operator
            instead of the formula's dozen per call made greedy decoding 1.12-1.15x faster
            and left beam search unchanged on a Xeon) and :func:`inference_attention` for bf16
            (2.6-4.9x the fused kernel per call, ``python bench/decode_ops.py``: docs/speed.md).
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
        # Set by minitrans.prepack for bf16 decoding on CPU: [W_q; W_k; W_v] laid out for oneDNN.
        self.packed_qkv: nn.Module | None = None
        self._stacked: tuple | None = None  # inference-only stacked Q/K/V weights (never saved)

    def _split_heads(self, x: Tensor) -> Tensor:
        b, length, _ = x.shape
        return x.view(b, length, self.n_heads, self.d_k).transpose(1, 2)  # (B, H, L, Dh)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values split into heads: (B, H, T, Dh), (B, H, L, Dh), (B, H, L, Dh).

        When no gradient is needed, self-attention (one input for all three) runs one
        matrix product with the three weight matrices stacked, instead of three.
        """
        if query is key is value and self.packed_qkv is not None:
            q, k, v = self.packed_qkv(query).chunk(3, dim=-1)  # (B, T, D) each
        elif query is key is value and not torch.is_grad_enabled() and self._plain_projections():
            weight, bias = self._stacked_qkv()
            q, k, v = F.linear(query, weight, bias).chunk(3, dim=-1)  # (B, T, D) each
        else:
            q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        return self._split_heads(q), self._split_heads(k), self._split_heads(v)

    def _plain_projections(self) -> bool:
        """Whether Q/K/V are ordinary Linear layers (not quantised ones, whose weights cannot
        simply be stacked)."""
        return all(type(getattr(m, "weight", None)) in (torch.Tensor, nn.Parameter)
                   for m in (self.q_proj, self.k_proj, self.v_proj))

    def _stacked_qkv(self) -> tuple[Tensor, Tensor]:
        """``[W_q; W_k; W_v]`` (3D, D) and their biases, rebuilt only when a weight changes."""
        parts = (self.q_proj, self.k_proj, self.v_proj)
        key = tuple((p.data_ptr(), p._version) for m in parts for p in (m.weight, m.bias))
        if self._stacked is None or self._stacked[0] != key:
            with torch.inference_mode(False), torch.no_grad():  # ordinary tensors, usable outside inference mode
                weight = torch.cat([m.weight for m in parts])
                bias = torch.cat([m.bias for m in parts])
            self._stacked = (key, weight, bias)
        return self._stacked[1], self._stacked[2]

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
        p = self.dropout if self.training else 0.0
        cpu, grad = query.device.type == "cpu", torch.is_grad_enabled()
        fused = self.use_fused if self.use_fused is not None else (not cpu or not grad)
        lean = self.use_fused is None and cpu and not grad and not need_weights and \
            (q.dtype == torch.bfloat16 or k.dtype != q.dtype)  # bf16 (or its float32 cache) on a CPU
        if lean:
            out, weights = inference_attention(q, k, v, mask), None
        elif need_weights or not fused:
            out, weights = scaled_dot_product_attention(q.to(k.dtype), k, v, mask, dropout=p)
            weights = weights if need_weights else None
        else:
            out = F.scaled_dot_product_attention(q.to(k.dtype), k, v, attn_mask=mask, dropout_p=p)
            weights = None
        if beams > 1:  # back to one row per beam: (B/K, H, K*T, ·) -> (B, H, T, ·)
            out = _ungroup(out, beams, t)
            weights = _ungroup(weights, beams, t) if weights is not None else None
        out = out.transpose(1, 2).reshape(b, t, d).to(query.dtype)  # (B, T, D)
        return self.out_proj(out), weights
