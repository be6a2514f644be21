"""Weights laid out once for oneDNN's matrix products: bf16 decoding on CPUs.

A plain ``F.linear`` hands its weight to the GEMM library, which reorders it into its own
blocked layout at every call. For decoding, where the same weights multiply a few hundred rows
at every step, :func:`prepack` does that once: each Linear of a bf16 model (the stacked
self-attention Q/K/V, the cross-attention projections, ``out_proj``, both feed-forward
matrices) and the output projection become a :class:`PackedLinear` holding the reordered
weight (``torch.ops.mkldnn._reorder_linear_weight``) and calling oneDNN's product on it
(``_linear_pointwise``). Outputs are identical to ``F.linear``'s in bf16 (tested);
prepacking made each product faster at decoding shapes and whole decoding a little
faster (docs/speed.md, "Prepacked matrix products").
``NativeEngine`` applies it whenever it decodes a Transformer in bf16 on a CPU that has them.
For inference only: the packed weights take no gradient, and the model is not trainable
afterwards.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

#: The rows a decoding step multiplies, as oneDNN's layout hint (beam 5 over ~80 sentences).
ROWS_HINT = 400


def available(model: nn.Module) -> bool:
    """Whether ``model`` can be packed: bf16 weights on a CPU whose oneDNN has bf16 kernels."""
    weight = next(model.parameters())
    return (weight.device.type == "cpu" and weight.dtype == torch.bfloat16 and torch.backends.mkldnn.is_available()
            and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()))


class PackedLinear(nn.Module):
    """``x @ W.T + b`` with ``W`` reordered once for oneDNN (any leading dimensions).
    ``keep_rows`` keeps ``W`` as it was too, for :meth:`restricted` (the output projection)."""

    def __init__(self, weight: Tensor, bias: Tensor | None, rows_hint: int = ROWS_HINT,
                 keep_rows: bool = False) -> None:
        super().__init__()
        with torch.no_grad():
            self.register_buffer("packed", torch.ops.mkldnn._reorder_linear_weight(weight.detach(), rows_hint))
            self.register_buffer("bias", None if bias is None else bias.detach().clone())
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        self.rows = weight.detach() if keep_rows else None  # (out, in), unpacked

    def restricted(self, index: Tensor) -> "PackedLinear":
        """The product for output rows ``index`` only, packed anew (a vocabulary shortlist)."""
        if self.rows is None:
            raise ValueError("this PackedLinear was made without keep_rows")
        bias = None if self.bias is None else self.bias.index_select(0, index)
        return PackedLinear(self.rows.index_select(0, index), bias)

    def forward(self, x: Tensor) -> Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")  # (..., in) -> (..., out)


def _packed(linear: nn.Linear) -> PackedLinear:
    return PackedLinear(linear.weight, linear.bias)


def prepack(model: nn.Module) -> nn.Module:
    """Replace, in place, the Linear layers of a bf16 :class:`~minitrans.model.transformer.Transformer`
    and its output projection by :class:`PackedLinear` (see the module's docstring)."""
    from minitrans.model.attention import MultiHeadAttention
    from minitrans.decoding.kernels import for_decoding
    from minitrans.model.layers import FeedForward

    if not available(model):
        raise ValueError("prepack needs a bf16 model on a CPU with oneDNN bf16 support")
    for_decoding(model)  # its attention modules take the packed Q/K/V product (minitrans.decoding.kernels)
    for module in list(model.modules()):
        if isinstance(module, MultiHeadAttention):
            parts = (module.q_proj, module.k_proj, module.v_proj)
            module.packed_qkv = PackedLinear(torch.cat([m.weight for m in parts]), torch.cat([m.bias for m in parts]))
            module.q_proj, module.k_proj, module.v_proj = (_packed(m) for m in parts)
            module.out_proj = _packed(module.out_proj)
        elif isinstance(module, FeedForward):
            module.linear1, module.linear2 = _packed(module.linear1), _packed(module.linear2)
    weight = model.tgt_embed.weight if model.output_proj is None else model.output_proj.weight
    model.output_proj = PackedLinear(weight, None, keep_rows=True)
    return model
