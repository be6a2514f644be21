"""Decoding kernels: the speed-ups a decoder needs and the paper does not, attached to a model
from the decoding side so that :mod:`minitrans.model.attention` and :mod:`minitrans.model.transformer`
read as the paper.

* :class:`DecodingAttention` — multi-head attention as a decoder runs it without gradients:
  self-attention's three projections as one product (Q, K and V weights stacked; or the
  oneDNN-packed product :mod:`minitrans.decoding.prepack` sets), and for bf16 on a CPU the lean kernel
  :func:`inference_attention` instead of PyTorch's fused one. With gradients it is the paper's
  :class:`~minitrans.model.attention.MultiHeadAttention`, unchanged.
* :func:`for_decoding` — attach it to every attention module of a model (in place; the
  weights, their names and the checkpoint format do not change). The native engine, training's
  validation and the prepacking attach it.
* :func:`projection` — the output projection over a vocabulary shortlist's ids only.

Each speed-up is measured in docs/speed.md ("The decoding step's small operations", "The fused
attention kernel for translation on CPUs", "Prepacked matrix products"); the outputs equal the
paper's path (tests/decoding/test_kernels.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from minitrans.model.attention import MultiHeadAttention

#: Rows shorter than this are softmaxed by hand in :func:`inference_attention`: PyTorch's CPU
#: softmax takes a scalar loop below one AVX-512 vector of float32 (16), several times slower than
#: ``amax``, ``exp`` and a division (docs/speed.md, "The decoding step's small operations").
SHORT_ROWS = 16


def inference_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    """``softmax(Q Kᵀ / √d_k) V`` for bf16 inference on a CPU: the formula, lean.

    :func:`~minitrans.model.attention.scaled_dot_product_attention` with only what inference needs:
    two batched products in the keys' number format, the scale, the mask and a float32 softmax.
    A decoding step has one query (or the K beam queries of a sentence) per row against a few
    dozen keys, and PyTorch's fused CPU kernel runs such problems several times slower than this
    in bf16 (docs/speed.md, "The fused attention kernel for translation on CPUs").

    Args:
        q: Queries (..., L_q, d_k), converted to the keys' dtype (the search keeps a bf16
            model's keys and values in float32: :func:`minitrans.decoding.search.cache_dtype`).
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


class DecodingAttention(MultiHeadAttention):
    """:class:`~minitrans.model.attention.MultiHeadAttention` with the decoder's speed-ups (see the
    module notes). Made by :func:`for_decoding` from an existing module, never constructed: the
    parameters are the paper module's. ``packed_qkv``, when :mod:`minitrans.decoding.prepack` sets it, is
    ``[W_q; W_k; W_v]`` laid out for oneDNN."""

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Without gradients, self-attention (one input for all three) runs one matrix product
        with the three weight matrices stacked, instead of three."""
        packed = self._modules.get("packed_qkv")
        if query is key is value and packed is not None:
            q, k, v = packed(query).chunk(3, dim=-1)  # (B, T, D) each
        elif query is key is value and not torch.is_grad_enabled() and self._plain_projections():
            weight, bias = self._stacked_qkv()
            q, k, v = F.linear(query, weight, bias).chunk(3, dim=-1)  # (B, T, D) each
        else:
            return super()._project(query, key, value)
        return self._split_heads(q), self._split_heads(k), self._split_heads(v)

    def _plain_projections(self) -> bool:
        """Whether Q/K/V are ordinary Linear layers (not quantised ones, whose weights cannot
        simply be stacked)."""
        return all(type(getattr(m, "weight", None)) in (torch.Tensor, nn.Parameter)
                   for m in (self.q_proj, self.k_proj, self.v_proj))

    def _stacked_qkv(self) -> tuple[Tensor, Tensor]:
        """``[W_q; W_k; W_v]`` (3D, D) and their biases, rebuilt only when a weight changes
        (kept as a plain attribute: never saved). A change is seen by the weights' version
        counters, which a fused optimizer step does not move (torch 2.13's fused AdamW):
        training calls :func:`refresh` before it decodes."""
        parts = (self.q_proj, self.k_proj, self.v_proj)
        key = tuple((p.data_ptr(), p._version) for m in parts for p in (m.weight, m.bias))
        stacked = self.__dict__.get("_stacked")
        if stacked is None or stacked[0] != key:
            with torch.inference_mode(False), torch.no_grad():  # ordinary tensors, usable outside inference mode
                weight = torch.cat([m.weight for m in parts])
                bias = torch.cat([m.bias for m in parts])
            stacked = self.__dict__["_stacked"] = (key, weight, bias)
        return stacked[1], stacked[2]

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
                need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """bf16 (or its float32 cache) on a CPU without gradients or weights asked for:
        :func:`inference_attention`; anything else: the paper module's choice."""
        lean = self.use_fused is None and q.device.type == "cpu" and not torch.is_grad_enabled() \
            and not need_weights and (q.dtype == torch.bfloat16 or k.dtype != q.dtype)
        if lean:
            return inference_attention(q, k, v, mask), None
        return super()._attend(q, k, v, mask, need_weights)


def for_decoding(model: nn.Module) -> nn.Module:
    """Give every :class:`~minitrans.model.attention.MultiHeadAttention` of ``model`` (a Transformer,
    an ensemble of them) the decoder's speed-ups, in place; returns ``model``. Idempotent; with
    gradients enabled the model computes exactly as before."""
    for module in model.modules():
        if type(module) is MultiHeadAttention:
            module.__class__ = DecodingAttention
    return model


def refresh(model: nn.Module) -> None:
    """Forget what the decoder's speed-ups derived from the weights (the stacked Q/K/V), so the
    next decoding rebuilds it from the weights of now. Training calls it before each validation:
    its fused optimizer updates the weights without moving their version counters."""
    for module in model.modules():
        module.__dict__.pop("_stacked", None)


def projection(model: nn.Module, vocab: Tensor) -> Callable[[Tensor], Tensor]:
    """The output projection of a :class:`~minitrans.model.transformer.Transformer` over the target
    ids ``vocab`` (S,) only: states (B, T, D) -> logits (B, T, S), column j scoring piece
    ``vocab[j]`` (a vocabulary shortlist, :mod:`minitrans.decoding.shortlist`). Made once per decoding
    batch: it copies S rows of the matrix (packed anew when :mod:`minitrans.decoding.prepack` packed it)."""
    output = model.output_proj
    if hasattr(output, "restricted"):  # a prepack.PackedLinear
        return output.restricted(vocab)
    weight = model.tgt_embed.weight if output is None else output.weight
    bias = getattr(output, "bias", None)
    rows = weight.index_select(0, vocab)  # (S, D)
    row_bias = None if bias is None else bias.index_select(0, vocab)  # (S,)
    return lambda x: F.linear(x, rows, row_bias)
