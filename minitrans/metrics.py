"""Corpus metrics with sacreBLEU: BLEU and chrF with their signatures, for any number of
references per sentence, and BLEU's sufficient statistics, which shards (DDP ranks, mixture
components) sum to score a whole set exactly.

Both training (validation BLEU) and evaluation use this module; neither imports the other.
"""

from __future__ import annotations

from typing import Any

import sacrebleu


def reference_streams(refs: list[list[str]]) -> list[list[str | None]]:
    """Per-sentence reference lists -> sacreBLEU's reference streams (None where a
    sentence has fewer references)."""
    n = max((len(r) for r in refs), default=1)
    return [[r[i] if i < len(r) else None for r in refs] for i in range(n)]


def score(hyps: list[str], refs: list[list[str]]) -> dict[str, Any]:
    """Corpus BLEU and chrF of ``hyps`` against per-sentence reference lists."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} reference lists.")
    streams = reference_streams(refs)
    bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
    b, c = bleu.corpus_score(hyps, streams), chrf.corpus_score(hyps, streams)
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2), "bleu_detail": str(b),
            "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature())}


def corpus_bleu(hyps: list[str], refs: list[list[str]]) -> sacrebleu.metrics.bleu.BLEUScore:
    """sacreBLEU corpus BLEU with a variable number of references per sentence."""
    return sacrebleu.BLEU().corpus_score(hyps, reference_streams(refs))


def bleu_statistics(hyps: list[str], refs: list[list[str]]) -> list[float]:
    """``[sentences, hypothesis length, reference length, 4 n-gram matches, 4 n-gram totals]``:
    sacreBLEU's corpus statistics, which add up over sentences, so the sums of shards' statistics
    give the BLEU of the whole set (:func:`bleu_from_statistics`), never an average of scores."""
    if not hyps:
        return [0.0] * 11
    score = corpus_bleu(hyps, refs)
    return [len(hyps), score.sys_len, score.ref_len, *score.counts, *score.totals]


def bleu_from_statistics(stats) -> float:
    """Corpus BLEU from (summed) :func:`bleu_statistics`, with sacreBLEU's default settings."""
    stats = [int(round(float(x))) for x in stats]
    default = sacrebleu.BLEU()
    return sacrebleu.BLEU.compute_bleu(
        stats[3:7], stats[7:11], stats[1], stats[2], smooth_method=default.smooth_method,
        smooth_value=default.smooth_value, effective_order=default.effective_order,
        max_ngram_order=default.max_ngram_order).score
