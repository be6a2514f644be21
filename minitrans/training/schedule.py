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


def budgeted(step: int, progress: float, peak_lr: float, warmup_steps: int, min_lr: float = 0.0,
             cooldown: float = 1.0) -> float:
    """A schedule that knows its budget: linear warm-up over ``warmup_steps`` steps, then a
    linear decay that reaches ``min_lr`` exactly when the budget is spent.

    ``progress`` is the share of the budget spent, in [0, 1]: the wall time used of
    ``trainer.max_time`` or the steps of ``trainer.max_steps``, whichever is further on
    (:func:`minitrans.training.budget.spent` measures it). ``cooldown`` is the share of the budget the
    decay takes: 1.0 decays from the start, as "Budgeted Training" (Li, Yumer & Ramanan, ICLR
    2020) recommends; 0.2 holds ``peak_lr`` until 80% of the budget, then decays
    (warm-up-stable-decay). A machine that makes few steps in its budget gets the whole curve,
    not its first third."""
    step = max(step, 1)
    warm = min(1.0, step / max(warmup_steps, 1))
    progress = min(max(progress, 0.0), 1.0)
    cooldown = min(max(cooldown, 1e-6), 1.0)
    left = min(1.0, (1.0 - progress) / cooldown)  # 1 until the cool-down starts, 0 at the end
    return min_lr + (peak_lr - min_lr) * warm * left
