"""Score translations with sacreBLEU (BLEU and chrF, with their signatures) and evaluate
checkpoints on a dataset split or on any aligned files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import sacrebleu

from minitrans.corpus import DataError, clean, load_corpus, read_aligned
from minitrans.search import DEFAULT_ALPHA
from minitrans.translate import Translator


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


SPLIT_ALIASES = {"test_2016_flickr": "test", "val": "valid", "validation": "valid", "dev": "valid"}


def load_eval_data(dataset: str | None, split: str, src: str | None, refs: list[str] | None,
                   data_dir: str | None = None, split_settings: dict | None = None) -> tuple[list[str], list[list[str]]]:
    """Sources and per-sentence references, from a named dataset split or from files.

    ``split_settings`` (``valid_size``, ``test_size``, ``seed``) must be those the model was
    trained with when the split is made by minitrans (Tatoeba): another seed would put
    training sentences into the test set. ``evaluate`` takes them from the checkpoint.
    """
    if src is not None:
        if not refs:
            raise DataError("--src needs at least one --ref file (aligned by line).")
        pairs = [read_aligned(src, ref) for ref in refs]
        sources = [s for s, _ in pairs[0]]
        return sources, [[clean(p[i][1]) for p in pairs] for i in range(len(sources))]
    if dataset is None:
        raise DataError("Give --dataset (with --split) or --src and --ref files.")
    settings = {k: v for k, v in (split_settings or {}).items() if k in ("valid_size", "test_size", "seed")}
    splits, _ = load_corpus(dataset, data_dir, **settings)
    split = SPLIT_ALIASES.get(split, split)
    if split not in splits:
        raise DataError(f"Dataset {dataset!r} has no split {split!r}; it has {sorted(splits)}.")
    data = splits[split]
    return list(data["en"]), [list(r) for r in data["refs"]]


def evaluate_checkpoint(checkpoint: str | os.PathLike, sources: list[str], refs: list[list[str]],
                        beam_size: int = 5, alpha: float = DEFAULT_ALPHA, device: str = "cpu",
                        translator: Translator | None = None, bf16: bool = False) -> tuple[dict[str, Any], list[str]]:
    """Translate ``sources`` with a checkpoint and score them. Returns (report, hypotheses)."""
    translator = translator or Translator.from_checkpoint(checkpoint, device=device, bf16=bf16)
    started = time.perf_counter()
    hyps = translator.translate(sources, beam_size=beam_size, alpha=alpha)
    seconds = time.perf_counter() - started
    report = {"checkpoint": str(checkpoint), "sentences": len(sources),
              "decoding": {"beam_size": beam_size, "alpha": alpha, "max_len_a": translator.max_len_a,
                           "max_len_b": translator.max_len_b, "device": device,
                           "bf16": translator.bf16},
              **score(hyps, refs), "decode_seconds": round(seconds, 2),
              "sentences_per_second": round(len(sources) / max(seconds, 1e-9), 1)}
    return report, hyps


def write_outputs(report: dict[str, Any], hyps: list[str], output_dir: str | os.PathLike, stem: str) -> Path:
    """Write ``stem.hyp.txt`` and ``stem.json``; returns the JSON path."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.hyp.txt").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    path = out / f"{stem}.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    return path
