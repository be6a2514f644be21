"""The model a bounded run can afford on this machine (``model_size: auto``, issue #43).

A 10-minute recipe makes 600 steps on a laptop CPU without bf16 units and 1,800 on one with
them; the model that learns most in 10 minutes is not the same on both. The recipe names a
table of candidates (:data:`CANDIDATES`, small to large); before training, :func:`probe` times a
few real training steps of each (forward, backward, Adam, at the run's precision and batch size)
and :func:`choose` takes the largest that still makes its own ``min_steps`` in the budget: a
larger model needs more steps before its capacity pays. The thresholds come from the runs in
docs/results.md ("The 10-minute model by machine", ``bench/quickstart_sizes.py``). The choice,
its reason and the probe's figures are printed before training and stored in the checkpoint
(``sizing``); ``minitrans evaluate`` reports them.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch

#: The dimensions a candidate sets (model.config's other settings stay as configured).
DIMENSIONS = ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff")


@dataclass(frozen=True)
class Candidate:
    """One model shape of the table."""

    name: str
    d_model: int
    n_heads: int
    n_encoder_layers: int
    n_decoder_layers: int
    d_ff: int
    #: The fewest steps (as the probe estimates them) this model must make in the budget to be
    #: chosen (the smallest is taken when none makes its own).
    min_steps: int = 0

    def dims(self) -> dict[str, int]:
        return {k: v for k, v in asdict(self).items() if k not in ("name", "min_steps")}


#: ``xs`` and ``s``: midway between the highest estimate at which ``s`` lost to ``xs`` (810, AVX2)
#: and the lowest at which it won (1,611, AMX), so that the probe's noise (a fifth from run to
#: run) flips no choice measured.
MIN_STEPS = 1500
#: ``m`` and larger: ``m`` has beaten ``s`` in no run. It lost at estimates of 1,386 and 1,406
#: (1,485 and 1,555 real steps), and the probe read it at 1,883 on a day it made about 1,600 real
#: steps: reading a fifth high, the probe must promise well over that. Where ``m`` starts to win
#: is not measured (docs/results.md).
LARGE_MIN_STEPS = 2500

#: Small to large, each needing at least the steps of the one before. ``m`` is the quickstart
#: model of the first releases.
CANDIDATES = (
    Candidate("xs", 128, 4, 3, 3, 512, MIN_STEPS),
    Candidate("s", 192, 4, 3, 3, 768, MIN_STEPS),
    Candidate("m", 256, 4, 3, 3, 1024, LARGE_MIN_STEPS),
    Candidate("l", 384, 6, 4, 4, 1536, LARGE_MIN_STEPS),
    Candidate("xl", 512, 8, 6, 6, 2048, LARGE_MIN_STEPS),
)
#: The share of a bounded run that validation takes (10 validations of 600 greedy sentences).
VALIDATION_SHARE = 0.08


def by_name(name: str) -> Candidate:
    found = next((c for c in CANDIDATES if c.name == name), None)
    if found is None:
        from minitrans.errors import ConfigError

        raise ConfigError(f"model_size {name!r}: choose auto, fixed, or one of {', '.join(c.name for c in CANDIDATES)}.")
    return found


def step_seconds(candidate: Candidate, vocab_size: int, max_tokens: int, dtype: torch.dtype | None,
                 device: str = "cpu", steps: int = 2) -> float:
    """Seconds one training step of ``candidate`` takes here: a batch of ``max_tokens`` target
    tokens (sentences of 16 pieces), forward, backward and Adam as training makes them (the
    blocked loss of :mod:`minitrans.training.loss`, AdamW fused in fp32), ``dtype`` autocast (None: fp32); the
    fastest of ``steps`` after one warm-up step."""
    from minitrans.model.config import ModelConfig
    from minitrans.training.loss import teacher_forced_loss
    from minitrans.precision import fused_adamw
    from minitrans.model.transformer import Transformer

    generator = torch.Generator().manual_seed(0)
    rows = max(1, max_tokens // 16)
    src = torch.randint(4, vocab_size, (rows, 16), generator=generator).to(device)
    tgt = torch.randint(4, vocab_size, (rows, 17), generator=generator).to(device)
    model = Transformer(ModelConfig(vocab_size=vocab_size, dropout=0.0, **candidate.dims())).to(device)
    kind = torch.device(device).type
    fused = fused_adamw(kind, scaled=dtype == torch.float16, clips_gradients=True)  # the recipes clip
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
    best = float("inf")
    for i in range(steps + 1):
        if device != "cpu":
            torch.cuda.synchronize()
        started = time.perf_counter()
        with torch.autocast(kind, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss, _, n = teacher_forced_loss(model, src, tgt[:, :-1], tgt[:, 1:], 0.1)
        optimizer.zero_grad()
        (loss / n).backward()
        optimizer.step()
        if device != "cpu":
            torch.cuda.synchronize()
        if i:  # the first step allocates and packs: not counted
            best = min(best, time.perf_counter() - started)
    return best


def probe(budget_seconds: float, vocab_size: int, max_tokens: int, dtype: torch.dtype | None, device: str = "cpu",
          candidates: tuple[Candidate, ...] = CANDIDATES, timer=None) -> dict[str, float]:
    """Seconds a step for each candidate, small to large, until one would make fewer than its
    ``min_steps`` in the budget (the larger ones would make fewer still, and need as many)."""
    timer = timer or step_seconds
    seconds: dict[str, float] = {}
    for candidate in candidates:
        seconds[candidate.name] = timer(candidate, vocab_size, max_tokens, dtype, device)
        if not fits(candidate, budget_seconds, seconds[candidate.name]):
            break
    return seconds


def fits(candidate: Candidate, budget_seconds: float, seconds_per_step: float) -> bool:
    return expected_steps(budget_seconds, seconds_per_step) >= candidate.min_steps


def expected_steps(budget_seconds: float, seconds_per_step: float) -> int:
    return int(budget_seconds * (1 - VALIDATION_SHARE) / max(seconds_per_step, 1e-9))


def choose(seconds: dict[str, float], budget_seconds: float,
           candidates: tuple[Candidate, ...] = CANDIDATES) -> tuple[Candidate, str]:
    """The largest probed candidate that makes its ``min_steps`` in the budget (else the
    smallest), and a line saying why."""
    probed = [c for c in candidates if c.name in seconds]
    fitting = [c for c in probed if fits(c, budget_seconds, seconds[c.name])]
    chosen = fitting[-1] if fitting else probed[0]
    rates = ", ".join(f"{c.name} {expected_steps(budget_seconds, seconds[c.name]):,}"
                      + f" / {c.min_steps:,}" for c in probed)
    minutes = f"{budget_seconds / 60:.0f} minutes"
    why = (f"the largest that makes the steps it needs in {minutes} here (steps expected / needed: {rates})"
           if fitting else f"no candidate makes the steps it needs in {minutes} here ({rates}): the smallest")
    return chosen, why
