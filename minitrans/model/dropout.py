"""Dropout (Srivastava et al., 2014) with a cheaper random mask on CPU.

``nn.Dropout`` draws one Bernoulli sample per element, and on CPU that random draw, not the
multiplication, is the cost: 20% of a ``multi30k-small`` training step (py-spy of a real run;
docs/speed.md). This module draws 32 random bits per *two* elements instead and keeps an element
when its 16-bit share is at least the drop threshold, so the drop rate is ``p`` rounded to a
multiple of 1/65536 (0.3 becomes 0.2999878). The kept elements are scaled by ``1/(1-p)`` (the
rounded p) so that the expectation is unchanged, exactly as in ``nn.Dropout``. Other devices use
``torch.nn.functional.dropout``.

Masks come from PyTorch's default generator, so ``seed_everything`` makes them reproducible.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_LEVELS = 1 << 16  # 16 random bits per element


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Zero each element of ``x`` with probability ``p`` (rounded to a multiple of 1/65536) and
    scale the rest by ``1/(1-p)``; the identity when not training or when ``p`` is 0."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, True)
    dropped = round(p * _LEVELS)  # how many of the 65536 equally likely 16-bit values drop
    if dropped >= _LEVELS:
        return x * 0.0
    n = x.numel()
    # (ceil(n/2),) int32 → (2·ceil(n/2),) int16, each value uniform on [-32768, 32767].
    bits = torch.randint(-(1 << 31), 1 << 31, ((n + 1) // 2,), dtype=torch.int32).view(torch.int16)[:n]
    drop = (bits < dropped - _LEVELS // 2).view(x.shape)  # P(drop) = dropped / 65536
    return x.masked_fill(drop, 0.0).mul_(_LEVELS / (_LEVELS - dropped))


class Dropout(nn.Module):
    """``nn.Dropout``'s interface over :func:`dropout`."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must lie in [0, 1], got {p}.")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
