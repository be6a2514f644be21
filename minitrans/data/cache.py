"""The prepared-data cache: a folder of tokenised Arrow splits and the SentencePiece model,
keyed by the data settings and the raw files' sizes and times, built once and published whole.

* :func:`fill` — what the cache holds, from a :class:`Plan` (the corpora and the data settings
  the build reads): every component's splits cleaned (decontaminated across a mixture's
  components), turned to the direction's source language, tokenised, over-long training pairs
  dropped, saved as Arrow; the SentencePiece model trained on the training text (a mixture's:
  one epoch's weighted sample) or the one given.

* :func:`cache_path` — ``cache_dir/<dataset>-<12 hex digits>``: a sha256 of the settings stamp
  (:func:`settings_stamp`)
  plus each raw file's resolved path, size and modification time, so a changed setting or a
  touched corpus file gives a new cache and the same ones reuse it in seconds.
* :func:`build` — the one-time work in a folder of this process's own, then a rename into
  place: the cache appears whole or not at all. A failed build leaves nothing behind; a full
  disk (or a file-size limit) is one line naming the cache, in whichever phase it is met, even
  when a library wrapped the error in its own. The check, build and rename hold a lock file beside the
  cache (``<cache>.lock``, an OS lock the kernel releases if the process dies), so two
  ``prepare`` runs started together do the work once: the second waits and reuses the first's
  cache. Without it, the second could find no cache, then delete the first's just published
  one as if a killed run had left it, while the first was reading it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
from filelock import FileLock

from minitrans.errors import DataError, disk_full, write_failed
from minitrans.data.mixture import CorpusSpec, decontaminate, epoch_rows, probabilities
from minitrans.data.sources import for_direction, load_corpus
from minitrans.data.stream import spm_sample
from minitrans.text.tokenizer import Tokenizer

log = logging.getLogger(__name__)
#: Part of every cache key: raise it when the cache's layout or content changes.
CACHE_VERSION = 1
DONE = "done.json"


#: The data settings every cache key holds (``data.*``).
KEYED = ("dataset", "files", "hub_id", "vocab_size", "spm_model_type", "max_len", "valid_size", "test_size", "seed",
         "corpora")


def settings_stamp(settings, mixture: bool, default_direction: str, tokenizer_sha256: str | None) -> dict[str, Any]:
    """The part of the key that the data settings give (``settings``: the data module's
    hyper-parameters). Entries are added only where they matter, so that the keys of settings
    made before them stay as they were: ``corpora`` and ``temperature`` for a mixture (its
    tokenizer is trained on the weighted sample), ``direction`` off the default one, ``tokenizer``
    (its sha256) when ``data.tokenizer`` gives one instead of training it."""
    stamp: dict[str, Any] = {k: settings[k] for k in KEYED}
    if mixture:
        stamp["temperature"] = settings["temperature"]
    else:
        del stamp["corpora"]
    if settings["direction"] != default_direction:
        stamp["direction"] = settings["direction"]
    if tokenizer_sha256:
        stamp["tokenizer"] = tokenizer_sha256
    return stamp


def cache_path(cache_dir: str | os.PathLike, dataset: str, stamp: dict[str, Any], sources: list[Path]) -> Path:
    """Where the cache of these settings (``stamp``) and raw files lives."""
    stamp = {**stamp, "version": CACHE_VERSION,
             "sources": [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in sources if p.exists()]}
    digest = hashlib.sha256(json.dumps(stamp, sort_keys=True).encode()).hexdigest()[:12]
    return Path(cache_dir) / f"{dataset}-{digest}"


def is_ready(path: Path) -> bool:
    """Whether a complete cache is at ``path``."""
    return (path / DONE).exists()


def is_empty_split(folder: Path) -> bool:
    """Whether a saved split holds no rows (``datasets`` saves one with no data file, and fails
    to load it): older caches kept the empty test split of ``data.test_size: 0``."""
    try:
        return not json.loads((folder / "state.json").read_text(encoding="utf-8")).get("_data_files")
    except (OSError, ValueError):
        return False


def read_report(path: Path) -> dict:
    """What the build recorded (cleaning, split sizes, seconds, mixture)."""
    return json.loads((path / DONE).read_text())


def build(path: Path, fill: Callable[[Path, Path], dict[str, Any]], sources: list[Path] = ()) -> bool:
    """Build the cache at ``path`` with ``fill(folder, scratch)``, which writes the cache's
    files into ``folder`` (``scratch`` is for intermediate files and is deleted after) and
    returns the report to record. Returns False when another process published the same
    cache first (it is complete and equal; this process waited for it and built nothing).
    The cache is no more readable than its ``sources``: built from a ``chmod 600`` corpus, its
    folder is ``0700`` from the start (the user's pairs, tokenised, are the user's)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_name(f"{path.name}.lock"))):
        if is_ready(path):
            return False
        return _build_and_publish(path, fill, _private(sources))


def _private(sources: list[Path]) -> bool:
    """Whether any source file may not be read by everyone who may read its folder's copies:
    one that group or others cannot read."""
    import stat

    for source in sources:
        try:
            mode = os.stat(source).st_mode
        except OSError:
            continue
        if not mode & stat.S_IROTH or not mode & stat.S_IRGRP:
            return True
    return False


def _build_and_publish(path: Path, fill: Callable[[Path, Path], dict[str, Any]], private: bool = False) -> bool:
    """:func:`build`'s work, under its lock."""
    started = time.perf_counter()
    for stale in path.parent.glob(f"{path.name}.tmp*"):  # killed builds' folders: nobody else holds the lock
        shutil.rmtree(stale, ignore_errors=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    scratch = tmp / "_build"
    try:
        tmp.mkdir()
        if private:  # before a byte of the user's text is written in it
            os.chmod(tmp, 0o700)
        scratch.mkdir(parents=True)
        report = fill(tmp, scratch)
        shutil.rmtree(scratch)
    except BaseException as err:  # nothing of a failed preparation stays behind
        shutil.rmtree(tmp, ignore_errors=True)
        full = disk_full(err)  # however deep a library wrapped it
        if full is not None:  # one line naming the cache, not a traceback
            raise write_failed(path, full) from None
        if isinstance(err, OSError) and str(tmp) in str(err.filename or ""):  # the cache's own folder
            raise write_failed(path, err) from None  # named as asked, never the temporary
        raise
    report["seconds"] = round(time.perf_counter() - started, 1)
    (tmp / DONE).write_text(json.dumps(report, indent=2))
    shutil.rmtree(path, ignore_errors=True)  # an incomplete cache (copied in by hand, or an older version's)
    tmp.rename(path)
    return True

# -- what a cache holds, and how it is built -------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """What a cache is built from: the corpora (a mixture's components, or one corpus as a
    mixture of one whose name is empty), the data settings the build reads (``data.*``), the
    direction's ``(source, target)`` and the SentencePiece model ``data.tokenizer`` gives (None:
    one is trained)."""

    components: tuple[CorpusSpec, ...]
    mixture: bool
    data_dir: str | None
    seed: int
    temperature: float
    vocab_size: int
    spm_model_type: str
    max_len: int
    hub_streaming: bool
    languages: tuple[str, str]
    tokenizer: Tokenizer | None = None


def split_key(component: CorpusSpec, split: str) -> str:
    """The key of a component's split in the cache: ``<name>/<split>``, or ``<split>`` for an
    unnamed single corpus."""
    return f"{component.name}/{split}" if component.name else split


def column(ds: datasets.Dataset, name: str) -> list:
    """One column as a plain Python list (fast to index on the training path)."""
    return ds.select_columns([name]).to_dict()[name]


class MixtureReport:
    """What cleaning did to each component of a mixture, and the sampling probabilities."""

    def __init__(self, parts: dict[str, Any], probs: dict[str, float]) -> None:
        self.parts, self.probs = parts, probs

    def to_dict(self) -> dict:
        return {name: {"sampling_probability": round(self.probs[name], 4), "cleaning": str(part)}
                for name, part in self.parts.items()}

    def __str__(self) -> str:
        return "; ".join(f"{name} (p={self.probs[name]:.3f}): {part}" for name, part in self.parts.items())


def fill(plan: Plan, folder: Path, scratch: Path) -> dict[str, Any]:
    """The cache's content, written into ``folder`` (``scratch``: for the training splits' Arrow
    files while they are built): every component's splits, cleaned, tokenised and saved, and the
    SentencePiece model trained on the training text (or the one the plan gives); returns the
    report of what cleaning did (:func:`build` publishes it with the cache)."""
    if plan.mixture:
        splits, report, spm_text = _load_mixture(plan, scratch)
    else:
        splits, report = _load_component(plan, plan.components[0], scratch)
        spm_text = spm_sample(splits["train"], plan.seed)
    tokenizer = plan.tokenizer or Tokenizer.train(spm_text, plan.vocab_size, plan.spm_model_type)
    del spm_text
    splits = _for_direction(plan, splits)
    _write_splits(plan, splits, report, tokenizer, folder)
    tokenizer.save(folder / "spm.model")
    return {"cleaning": str(report), "splits": {n: len(s) for n, s in splits.items()},
            **({"mixture": report.to_dict()} if isinstance(report, MixtureReport) else {})}


def _for_direction(plan: Plan, splits: dict[str, datasets.Dataset]) -> dict[str, datasets.Dataset]:
    """Every component's evaluation splits turned to the direction's source language
    (:func:`~minitrans.data.sources.for_direction`); the identity for English→French."""
    out: dict[str, datasets.Dataset] = {}
    for c in plan.components:
        mine = {k: v for k, v in splits.items() if not c.name or k.split("/", 1)[0] == c.name}
        out.update(for_direction(c.dataset, mine, plan.languages[0]))
    return out


def _load_component(plan: Plan, c: CorpusSpec, scratch: Path) -> tuple[dict[str, datasets.Dataset], Any]:
    """One component's splits, keyed as :func:`split_key` names them, and its cleaning report."""
    parts, report = load_corpus(c.dataset, plan.data_dir, c.files, c.hub_id, c.valid_size, c.test_size, plan.seed,
                                build_dir=scratch / c.name if c.name else scratch, hub_streaming=plan.hub_streaming)
    return {split_key(c, name): ds for name, ds in parts.items()}, report


def _write_splits(plan: Plan, splits: dict[str, datasets.Dataset], report, tokenizer: Tokenizer, folder: Path) -> None:
    """Tokenise every split (``datasets.map``, batched), drop over-long training pairs
    (counted in ``report``) and save each split as Arrow under ``folder``."""
    source, target = plan.languages
    max_len = plan.max_len

    def tokenize(rows: dict) -> dict:
        src, tgt = tokenizer.encode(rows[source]), tokenizer.encode(rows[target])
        return {"src_ids": src, "tgt_ids": tgt, "src_len": [len(s) for s in src],
                "tgt_len": [len(t) for t in tgt]}

    def short(src_len: list[int], tgt_len: list[int]) -> list[bool]:
        return [max(a, b) < max_len for a, b in zip(src_len, tgt_len)]

    for name, split in splits.items():
        kind = name.rsplit("/", 1)[-1]
        if not len(split) and kind == "valid":
            where = f"corpus {name.split('/')[0]!r}" if "/" in name else plan.components[0].dataset
            raise DataError(f"the validation split of {where} is empty: training validates on it. Give a valid: "
                            "file, or set data.valid_size to at least 1.")
        if not len(split) and kind != "train":  # data.test_size: 0, or an empty test file: no such split
            log.info("%s: empty, so not kept (no %s split)", name, kind)
            continue
        split = split.map(tokenize, batched=True, batch_size=2000, desc=f"tokenising {name}")
        if name.rsplit("/", 1)[-1] == "train":
            before = len(split)
            split = split.filter(short, input_columns=["src_len", "tgt_len"], batched=True,
                                 batch_size=10_000, desc="dropping over-long pairs")
            part = report.parts[name.split("/")[0]] if isinstance(report, MixtureReport) else report
            if before - len(split):
                part.dropped[f"longer than {max_len - 1} pieces"] += before - len(split)
                part.kept = len(split)
            if not len(split):
                raise DataError(f"No training pair of {name!r} is left after cleaning ({part}): "
                                f"check the corpus and data.max_len ({max_len}).")
        split.save_to_disk(str(folder / name))


def _load_mixture(plan: Plan, build: Path) -> tuple[dict[str, datasets.Dataset], Any, list[str]]:
    """Every component's splits (``<name>/<split>``), decontaminated training splits,
    and the SentencePiece training text: one epoch's weighted sample of both sides, so the
    joint vocabulary serves each corpus by its share of training, not by its raw size."""
    splits, reports = {}, []
    for c in plan.components:
        parts, report = _load_component(plan, c, build)
        splits.update(parts)
        reports.append((c.name, report))
    held_out = [ds for key, ds in splits.items() if not key.endswith("/train")]
    for (name, report) in reports:
        kept, dropped = decontaminate(splits[f"{name}/train"], held_out)
        if dropped:
            report.dropped["sharing a sentence with an evaluation split"] += dropped
            report.kept = len(kept)
        splits[f"{name}/train"] = kept
    sizes = [len(splits[f"{c.name}/train"]) for c in plan.components]
    probs = probabilities(sizes, [c.weight for c in plan.components], plan.temperature)
    train = datasets.concatenate_datasets([splits[f"{c.name}/train"] for c in plan.components])
    sample = train.select(epoch_rows(sizes, probs, plan.seed))
    report = MixtureReport(dict(reports), dict(zip([c.name for c in plan.components], probs)))
    return splits, report, column(sample, "en") + column(sample, "fr")
