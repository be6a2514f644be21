"""Learning-rate schedules as pure functions of the step (1-based)."""

from __future__ import annotations

import math


def inverse_sqrt(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """The paper's schedule (section 5.3, equation 3):
    ``lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)``."""
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def cosine(step: int, peak_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> float:
    """Linear warm-up to ``peak_lr``, then cosine decay to ``min_lr`` at ``total_steps``."""
    step = max(step, 1)
    if step <= warmup_steps:
        return peak_lr * step / max(warmup_steps, 1)
    progress = min((step - warmup_steps) / max(total_steps - warmup_steps, 1), 1.0)
    return min_lr + 0.5 * (peak_lr - min_lr) * (1 + math.cos(math.pi * progress))
