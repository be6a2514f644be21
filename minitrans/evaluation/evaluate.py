"""Score translations with sacreBLEU (BLEU and chrF, with their signatures) and evaluate
checkpoints on a dataset split or on any aligned files."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from minitrans.text.cleaning import clean
from minitrans.data.corpus import read_aligned
from minitrans.metrics import score
from minitrans.data.sources import for_direction, load_corpus
from minitrans.errors import DataError
from minitrans.decoding.settings import DEFAULT_ALPHA, DEFAULT_BEAM
from minitrans.text.textio import write_text_atomic
from minitrans.translate import Translator


SPLIT_ALIASES = {"test_2016_flickr": "test", "val": "valid", "validation": "valid", "dev": "valid"}


def load_eval_data(dataset: str | None, split: str, src: str | None, refs: list[str] | None,
                   data_dir: str | None = None, split_settings: dict | None = None,
                   files: dict[str, str] | None = None, hub_id: str | None = None,
                   source_lang: str = "en") -> tuple[list[str], list[list[str]]]:
    """Sources and per-sentence references, from a named dataset split or from files.

    A dataset split is read in the model's direction: ``source_lang="fr"`` gives French
    sources with all their English references (:func:`~minitrans.data.sources.for_direction`).

    ``split_settings`` (``valid_size``, ``test_size``, ``seed``) must be those the model was
    trained with when the split is made by minitrans (Tatoeba): another seed would put
    training sentences into the test set. ``evaluate`` takes them from the checkpoint, and
    for a mixture component its ``files`` and ``hub_id`` too.
    """
    if src is not None:
        if not refs:
            raise DataError("--src needs at least one --ref file (aligned by line).")
        pairs = [read_aligned(src, ref, hint="Check the --src/--ref paths.") for ref in refs]
        for ref, ref_pairs in zip(refs, pairs):
            empty = [i for i, (_, r) in enumerate(ref_pairs, 1) if not clean(r)]
            if empty:
                raise DataError(f"{ref}, line {empty[0]}: empty reference ({len(empty)} empty line(s) in all); "
                                "every source line needs its translation. Remove the pair or fill in the line.")
        sources = [s for s, _ in pairs[0]]
        return sources, [[clean(p[i][1]) for p in pairs] for i in range(len(sources))]
    if dataset is None:
        raise DataError("Give --dataset (with --split) or --src and --ref files.")
    settings = {k: v for k, v in (split_settings or {}).items() if k in ("valid_size", "test_size", "seed")}
    split = SPLIT_ALIASES.get(split, split)
    splits, _ = load_corpus(dataset, data_dir, files=files, hub_id=hub_id, with_train=split == "train", **settings)
    if split not in splits:
        raise DataError(f"Dataset {dataset!r} has no split {split!r}; it has {sorted(splits)}.")
    data = for_direction(dataset, {split: splits[split]}, source_lang)[split]
    return list(data[source_lang]), [list(r) for r in data["refs"]]


def eval_sets(trained_on: dict, dataset: str | None) -> list[dict]:
    """What ``minitrans evaluate --dataset D`` scores for a checkpoint trained on ``trained_on``.

    Returns one entry per evaluation set: ``{"name", "dataset", "files", "hub_id",
    "split_settings"}``. A mixture checkpoint without ``--dataset`` is scored on every
    component; ``--dataset`` may name a component (by its name or its dataset). Split
    settings are those of training whenever the data is the training data's, so a split that
    minitrans makes (Tatoeba's) is rebuilt exactly and cannot overlap training.
    """
    seed = {"seed": trained_on["seed"]} if "seed" in trained_on else {}
    corpora = trained_on.get("corpora") or []
    if trained_on.get("dataset") == "mixture":
        chosen = [c for c in corpora if dataset is None or dataset in (c["name"], c["dataset"])]
        if dataset is None and not chosen:
            raise DataError("The checkpoint's mixture lists no corpora: give --dataset or --src/--ref.")
        return [{"name": c["name"], "dataset": c["dataset"], "files": c.get("files"), "hub_id": c.get("hub_id"),
                 "split_settings": {"valid_size": c["valid_size"], "test_size": c["test_size"], **seed}}
                for c in chosen] or [{"name": dataset, "dataset": dataset, "files": None, "hub_id": None,
                                      "split_settings": None}]
    if dataset is None:
        raise DataError("Give --dataset (with --split) or --src and --ref files.")
    same = trained_on.get("dataset") == dataset
    return [{"name": dataset, "dataset": dataset, "files": trained_on.get("files") if same else None,
             "hub_id": trained_on.get("hub_id") if same else None, "split_settings": trained_on if same else None}]


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
