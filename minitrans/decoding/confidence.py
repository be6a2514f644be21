"""A confidence score for each translated sentence, and a "low" flag calibrated on held-out data.

The score is the model's own geometric-mean probability per output token, eos included:
``exp(log p(translation | source) / (pieces + 1))``, in (0, 1]. It says how sure the model was
of the words it chose, not whether they are right: a fluent wrong translation can score high,
and the score is not comparable across models or decoding settings. :func:`calibrate` turns it
into a flag: it translates a validation split with the decoding settings users run, and takes
as the threshold the score below which the stated share of those sentences fall; it reports
how well the score ranks sentence-level chrF there (Spearman's rank correlation), so that
users see how much the flag is worth. ``minitrans calibrate`` stores the result in a new
checkpoint (``meta["confidence"]``), and every translation of that model carries the flag.
"""

from __future__ import annotations

import math
from typing import Any

#: The share of validation sentences the "low" flag marks by default.
DEFAULT_SHARE = 0.1


def confidence(logprob: float, pieces: int) -> float:
    """Geometric-mean probability per token of a hypothesis of ``pieces`` pieces (+ eos)."""
    if not math.isfinite(logprob):
        return 0.0
    return math.exp(logprob / (pieces + 1))


def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation of two equal-length lists (nan when either is constant)."""
    if len(x) != len(y) or len(x) < 2:
        raise ValueError("spearman needs two lists of the same length, two values or more")
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx, vy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return cov / math.sqrt(vx * vy) if vx and vy else float("nan")


def threshold(scores: list[float], share: float) -> float:
    """The score below which ``share`` of ``scores`` fall (the lower ``share`` quantile)."""
    if not 0.0 < share < 1.0:
        raise ValueError(f"share must be between 0 and 1, got {share}")
    ordered = sorted(scores)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def ranking(scores: list[float], hyps: list[str], refs: list[list[str]],
            low: list[bool] | None = None) -> dict[str, Any]:
    """How well ``scores`` rank sentence chrF (Spearman; None when either side is constant)
    and, given the ``low`` flags, the share flagged and the mean chrF of both groups."""
    import sacrebleu

    chrf = [sacrebleu.sentence_chrf(h, r).score for h, r in zip(hyps, refs)]
    rho = spearman(scores, chrf)
    report: dict[str, Any] = {"spearman_chrf": round(rho, 4) if rho == rho else None}  # nan: a constant list
    if low is not None:
        flagged = [c for c, f in zip(chrf, low) if f]
        rest = [c for c, f in zip(chrf, low) if not f]
        report.update({"low_share": round(len(flagged) / len(chrf), 4),
                       "chrf_low": round(sum(flagged) / len(flagged), 2) if flagged else None,
                       "chrf_rest": round(sum(rest) / len(rest), 2) if rest else None})
    return report


def calibrate(scores: list[float], hyps: list[str], refs: list[list[str]], share: float = DEFAULT_SHARE,
              **decoding: Any) -> dict[str, Any]:
    """The calibration record: threshold, share, how many sentences it rests on, and
    :func:`ranking` on those sentences with the threshold's flags."""
    if len(scores) < 20:
        raise ValueError(f"{len(scores)} sentences are too few to calibrate on; give 20 or more (1,000 is better)")
    cut = threshold(scores, share)
    return {"threshold": cut, "share": share, "sentences": len(scores),
            **ranking(scores, hyps, refs, [s < cut for s in scores]), "decoding": decoding}
