"""Score translations with sacreBLEU (BLEU and chrF, with their signatures) and evaluate
checkpoints on a dataset split or on any aligned files."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from minitrans.metrics import score
from minitrans.decoding.settings import DEFAULT_ALPHA, DEFAULT_BEAM
from minitrans.text.textio import write_text_atomic
from minitrans.translate import Translator


def evaluate_checkpoint(checkpoint: str | os.PathLike, sources: list[str], refs: list[list[str]],
                        beam_size: int = DEFAULT_BEAM, alpha: float = DEFAULT_ALPHA, device: str = "cpu",
                        translator: Translator | None = None, precision: str = "auto",
                        progress=None) -> tuple[dict[str, Any], list[str]]:
    """Translate ``sources`` with a checkpoint and score them. Returns (report, hypotheses).
    ``progress(n)`` is called as each decoding batch of n sentences is done."""
    translator = translator or Translator.load(checkpoint, device=device, precision=precision)  # --engine auto
    started = time.perf_counter()
    # A test set's lines are its sentences, aligned with the references: each is translated
    # whole (split=False), so a score measures the model, not the segmenter.
    results = translator.translate_detailed(sources, beam_size=beam_size, alpha=alpha, progress=progress,
                                            split=False)
    seconds = time.perf_counter() - started
    hyps = [r.text for r in results]
    report = {"checkpoint": str(checkpoint), "sentences": len(sources),
              "decoding": {"engine": translator.engine.name, "engine_reason": translator.engine_reason,
                           "workers": translator.engine.workers, "beam_size": beam_size, "alpha": alpha,
                           "max_len_a": translator.max_len_a,
                           "max_len_b": translator.max_len_b, "device": device,
                           "bf16": translator.bf16, "precision": translator.precision,
                           "shortlist": translator.shortlist},
              **score(hyps, refs), "decode_seconds": round(seconds, 2),
              "sentences_per_second": round(len(sources) / max(seconds, 1e-9), 1),
              "confidence": confidence_report(results, refs)}
    adapted = (getattr(translator, "meta", None) or {}).get("adapted")
    if adapted:  # minitrans adapt wrote it: from which model, on which data
        report["adapted_from"] = {"parent": adapted.get("parent"), "data": adapted.get("data"),
                                  "minutes": adapted.get("minutes")}
    sizing = (getattr(translator, "meta", None) or {}).get("sizing")
    if sizing:  # model_size: auto chose this model for the machine it trained on: say which and why
        report["model_size"] = {k: sizing[k] for k in ("chosen", "why") if k in sizing}
    return report, hyps


def confidence_report(results, refs: list[list[str]]) -> dict[str, Any]:
    """:func:`minitrans.decoding.confidence.ranking` of the results' confidence on this set (with the
    low flags of a calibrated model)."""
    from minitrans.decoding.confidence import ranking

    scored = [(r, ref) for r, ref in zip(results, refs) if r.confidence is not None]
    if len(scored) < 2:
        return {}
    flags = [r.low_confidence for r, _ in scored]
    return ranking([r.confidence for r, _ in scored], [r.text for r, _ in scored], [ref for _, ref in scored],
                   None if None in flags else flags)


def output_stem(checkpoints: list[str | os.PathLike], label: str, beam: int,
                data_files: list[str | os.PathLike] = ()) -> str:
    """The file stem of an evaluation's outputs: ``<checkpoint stem>-<hash>.<data>.beam<k>``.

    The hash (8 hex digits) is taken over the checkpoints' resolved paths and any ``--src``/
    ``--ref`` files, so two runs' ``best.ckpt`` (or two source files of one name) never
    overwrite each other's reports, while evaluating the same checkpoint on the same data again
    replaces its own report.
    """
    identity = "\0".join(os.path.realpath(p) for p in [*checkpoints, "", *data_files])
    digest = hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    name = "ensemble" if len(checkpoints) > 1 else Path(checkpoints[0]).stem
    return f"{name}-{digest}.{label}.beam{beam}"


def write_outputs(report: dict[str, Any], hyps: list[str], output_dir: str | os.PathLike, stem: str) -> Path:
    """Write ``stem.hyp.txt`` and ``stem.json``; returns the JSON path."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / f"{stem}.hyp.txt", hyps)
    path = out / f"{stem}.json"
    write_text_atomic(path, [json.dumps(report, indent=2, ensure_ascii=False)])
    return path
