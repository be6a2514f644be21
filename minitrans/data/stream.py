"""Training splits streamed from files into Arrow, in memory that does not grow with the corpus.

A corpus of millions of pairs must never be held as Python strings: ``build_train_split`` reads
pairs one at a time (from a file reader or any iterable), cleans and filters each as it passes,
and lets ``datasets.Dataset.from_generator`` write them to Arrow files on disk in batches. Exact
duplicates are found from a 64-bit hash column (BLAKE2b of both sides) with NumPy, not from a
Python set of strings: 8 bytes per pair instead of both sentences. The result equals
:func:`minitrans.text.cleaning.clean_train_pairs` of the same pairs row for row (same order, first
occurrence kept; ``tests/data/test_stream.py`` checks it); a hash collision, which would drop a pair
wrongly, has probability about ``n² / 2⁶⁵`` (2·10⁻⁶ for 8M pairs).

The SentencePiece model is trained on a bounded, seeded sample of the training rows
(:func:`spm_sample`), so that step is bounded too.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import datasets
import numpy as np

from minitrans.text.cleaning import CleaningReport, clean, reject_reason
from minitrans.errors import DataError

TRAIN_FEATURES = datasets.Features({"en": datasets.Value("string"), "fr": datasets.Value("string")})
# Pairs (two sentences each) SentencePiece trains on at most. Its trainer sets the peak memory of
# preparation: with a 1M-pair sample, preparing 1M pairs peaked at 3.6 GiB RSS, as high as the old
# in-memory path (bench/benchmark_prepare.py). Corpora up to this size are used whole, as before.
SPM_SAMPLE_PAIRS = 200_000
_WRITER_BATCH = 10_000  # rows per Arrow record batch while writing


def numeric_column(ds: datasets.Dataset, name: str) -> np.ndarray:
    """One numeric column as a NumPy array, straight from Arrow (``with_format("numpy")`` builds
    it row by row, which is slow for millions of rows)."""
    return ds.with_format("arrow", columns=[name])[:][name].to_numpy()


def _key(en: str, fr: str) -> int:
    """A signed 64-bit hash of the pair (stable across processes, unlike ``hash``)."""
    digest = hashlib.blake2b(en.encode() + b"\0" + fr.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def build_train_split(pairs: Callable[[], Iterable[tuple[str, str]]], max_chars: int = 400,
                      build_dir: str | Path | None = None) -> tuple[datasets.Dataset, CleaningReport]:
    """Clean the pairs that ``pairs()`` yields into an Arrow-backed training split.

    Args:
        pairs: Called once; yields raw ``(english, french)`` pairs.
        max_chars: Pairs with a side longer than this are dropped.
        build_dir: Folder for the Arrow files (they must outlive the returned dataset, which
            memory-maps them). ``None``: a temporary folder, and the split is loaded into memory.

    Returns:
        ``(Dataset with columns en, fr, report of what was dropped)``.
    """
    report = CleaningReport()

    def rows():
        for en, fr in pairs():
            en, fr = clean(en), clean(fr)
            why = reject_reason(en, fr, max_chars)
            if why:
                report.dropped[why] += 1
            else:
                yield {"en": en, "fr": fr, "key": _key(en, fr)}

    features = datasets.Features({**TRAIN_FEATURES, "key": datasets.Value("int64")})
    in_memory = build_dir is None
    folder = Path(tempfile.mkdtemp(prefix="minitrans-train-")) if in_memory else Path(build_dir)
    try:
        ds = datasets.Dataset.from_generator(rows, features=features, cache_dir=str(folder),
                                             keep_in_memory=in_memory, writer_batch_size=_WRITER_BATCH)
    except datasets.exceptions.DatasetGenerationError as err:  # a reader's DataError, wrapped
        raise (err.__cause__ if isinstance(err.__cause__, DataError) else err) from None
    finally:
        if in_memory:
            shutil.rmtree(folder, ignore_errors=True)
    keys = numeric_column(ds, "key")  # (n,) int64: the only per-pair array held in memory
    _, first = np.unique(keys, return_index=True)  # index of each key's first occurrence
    if len(first) < len(ds):
        report.dropped["exact duplicates"] += len(ds) - len(first)
        ds = ds.select(np.sort(first))  # first occurrences, in corpus order
    ds = ds.remove_columns("key")
    report.kept = len(ds)
    return ds, report


def spm_sample(train: datasets.Dataset, seed: int, limit: int = SPM_SAMPLE_PAIRS) -> list[str]:
    """The text SentencePiece trains on: every English then every French sentence of the split,
    or of ``limit`` rows drawn at random (seeded) when the split is larger."""
    if len(train) > limit:
        rows = np.sort(np.random.default_rng(seed).choice(len(train), size=limit, replace=False))
        train = train.select(rows)
    text = train.select_columns(["en", "fr"]).to_dict()
    return text["en"] + text["fr"]
