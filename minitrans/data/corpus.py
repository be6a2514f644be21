"""Parallel English–French text: read, validate, split — the building blocks of the corpus
sources in :mod:`minitrans.data.sources` (which says where each source's files are).

Every split is a :class:`datasets.Dataset` with columns ``en`` (source), ``fr`` (first
reference) and ``refs`` (all French references of that English sentence). For a French→English
model, :func:`reverse_split` turns an evaluation split around: one row per French source with
all its English references in ``refs`` (``en`` and ``fr`` keep naming the languages).
"""

from __future__ import annotations

import itertools
import logging
import os
import random
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import datasets

from minitrans.text.cleaning import CleaningReport, clean
from minitrans.errors import DataError
from minitrans.data.stream import build_train_split
from minitrans.text.textio import iter_lines

log = logging.getLogger(__name__)

DATA_ENV = "MINITRANS_DATA"
MULTI30K_SPLITS = {"train": "train", "valid": "val", "test": "test_2016_flickr",
                   "test_2017_flickr": "test_2017_flickr", "test_2017_mscoco": "test_2017_mscoco"}


def resolve_data_dir(given: str | os.PathLike | None = None) -> Path:
    """The raw-corpus directory: the one the user gave (``--data-dir``, ``data.data_dir``),
    else ``$MINITRANS_DATA``, else ``data/raw``. What a user typed wins over the environment."""
    value = given or os.environ.get(DATA_ENV) or "data/raw"
    return Path(value).expanduser()


def data_dir_for(given: str | None, recorded: str | None) -> str | None:
    """The folder to read a checkpoint's corpora from: the one the user gave now, else
    ``$MINITRANS_DATA``, else the one recorded when it was trained (another machine's, maybe)."""
    return given or os.environ.get(DATA_ENV) or recorded


DATA_HINT = (f"Point {DATA_ENV} (or data.data_dir, or --data-dir) at the directory holding the corpora, e.g. "
             f"`export {DATA_ENV}=../shared/data`, or fetch them with `minitrans download`.")


def _require_file(path: Path, what: str, hint: str = DATA_HINT) -> None:
    if not path.is_file():
        raise DataError(f"{what} not found: {path}. {hint}")
    if path.stat().st_size == 0:
        raise DataError(f"{what} is empty: {path}. Replace it with a complete copy of the corpus.")


def iter_tsv(path: str | os.PathLike) -> Iterator[tuple[str, str]]:
    """Pairs from an ``English<TAB>French[<TAB>anything]`` file, raw (not cleaned), one at a time.
    Lines are read as :mod:`minitrans.text.textio` reads them (``\n`` only, BOM dropped, UTF-8). The
    file is checked at once; a malformed line raises when the reading reaches it."""
    path = Path(path)
    _require_file(path, "Parallel TSV file")
    return _tsv_pairs(path)


def _tsv_pairs(path: Path) -> Iterator[tuple[str, str]]:
    found = False
    with open(path, "rb") as f:
        for number, line in enumerate(iter_lines(f, str(path)), 1):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < 2:
                raise DataError(
                    f"{path}, line {number}: expected 'English<TAB>French' but found no tab: "
                    f"{line[:80]!r}. Fix or delete that line."
                )
            found = True
            yield fields[0], fields[1]
    if not found:
        raise DataError(f"{path} holds no sentence pairs (only blank lines).")


def read_tsv(path: str | os.PathLike) -> list[tuple[str, str]]:
    """Every pair of :func:`iter_tsv`, as a list."""
    return list(iter_tsv(path))


def iter_aligned(src_path: str | os.PathLike, tgt_path: str | os.PathLike,
                 hint: str = DATA_HINT) -> Iterator[tuple[str, str]]:
    """Pairs from two files aligned by line (line i of one translates line i of the other), one
    at a time. Both files are checked at once; unequal line counts raise at the end."""
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    _require_file(src_path, "Source file", hint)
    _require_file(tgt_path, "Target file", hint)
    return _aligned_pairs(src_path, tgt_path)


def _aligned_pairs(src_path: Path, tgt_path: Path) -> Iterator[tuple[str, str]]:
    counts = [0, 0]
    with open(src_path, "rb") as s, open(tgt_path, "rb") as t:
        for src, tgt in itertools.zip_longest(iter_lines(s, str(src_path)), iter_lines(t, str(tgt_path))):
            counts[0] += src is not None
            counts[1] += tgt is not None
            if src is not None and tgt is not None:
                yield src, tgt
    if counts[0] != counts[1]:
        raise DataError(
            f"Aligned files differ in line count: {src_path} has {counts[0]} lines, {tgt_path} has "
            f"{counts[1]}. Each line of one must translate the same line of the other."
        )


def read_aligned(src_path: str | os.PathLike, tgt_path: str | os.PathLike,
                 hint: str = DATA_HINT) -> list[tuple[str, str]]:
    """Every pair of :func:`iter_aligned`, as a list."""
    return list(iter_aligned(src_path, tgt_path, hint))


def eval_split(pairs) -> datasets.Dataset:
    """An evaluation split, one row per English sentence with all its references, in
    first-appearance order. Only normalised: evaluation data is never filtered."""
    refs: dict[str, list[str]] = {}
    for en, fr in pairs:
        en, fr = clean(en), clean(fr)
        bucket = refs.setdefault(en, [])
        if fr not in bucket:
            bucket.append(fr)
    rows = [(en, fr) for en, fr in refs.items()]
    return datasets.Dataset.from_dict({
        "en": [en for en, _ in rows], "fr": [frs[0] for _, frs in rows], "refs": [frs for _, frs in rows]})


def aligned_split(pairs) -> datasets.Dataset:
    """An official evaluation split kept line for line (duplicates too), one reference each."""
    en = [clean(s) for s, _ in pairs]
    fr = [clean(t) for _, t in pairs]
    return datasets.Dataset.from_dict({"en": en, "fr": fr, "refs": [[t] for t in fr]})


def reverse_split(split: datasets.Dataset, grouped: bool) -> datasets.Dataset:
    """An English→French evaluation split as a French→English one: ``refs`` then holds English.

    A ``grouped`` split (:func:`eval_split`: one row per English sentence) is regrouped, one row
    per French sentence in first-appearance order with every English sentence paired with it;
    an official split (:func:`aligned_split`) stays line for line, its English line the one
    reference."""
    if not grouped:
        return datasets.Dataset.from_dict({"en": list(split["en"]), "fr": list(split["fr"]),
                                           "refs": [[en] for en in split["en"]]})
    refs: dict[str, list[str]] = {}
    for en, frs in zip(split["en"], split["refs"]):
        for fr in frs:
            bucket = refs.setdefault(fr, [])
            if en not in bucket:
                bucket.append(en)
    return datasets.Dataset.from_dict({"en": [ens[0] for ens in refs.values()], "fr": list(refs),
                                       "refs": list(refs.values())})


def grouped_split(pairs, valid_size: int, test_size: int, seed: int, max_group: int = 8):
    """Seeded train/valid/test split with no leakage in either language.

    Pairs are grouped into connected components of the graph whose nodes are English and
    French sentences and whose edges are pairs: "I'm sorry." – "Désolé." – "Sorry." end up
    in one group. Whole groups go to one split, so no source sentence of valid/test and
    none of their references appears in train. Groups larger than ``max_group`` pairs
    always go to train (one huge group would otherwise dominate a test set).

    Returns:
        ``(train_pairs, valid_pairs, test_pairs)``; ``valid_size``/``test_size`` count
        English sentences.
    """
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for en, fr in pairs:
        a, b = find(("en", en)), find(("fr", fr))
        if a != b:
            parent[b] = a
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for en, fr in pairs:
        groups.setdefault(find(("en", en)), []).append((en, fr))
    keys = sorted(groups, key=lambda k: k[1])  # deterministic order before the seeded shuffle
    random.Random(seed).shuffle(keys)
    splits = {"test": [], "valid": [], "train": []}
    counts = {"test": 0, "valid": 0}
    for key in keys:
        group = groups[key]
        n_en = len({en for en, _ in group})
        target = "train"
        if len(group) <= max_group:
            if counts["test"] < test_size:
                target = "test"
            elif counts["valid"] < valid_size:
                target = "valid"
        if target != "train":
            counts[target] += n_en
        splits[target].extend(group)
    return splits["train"], splits["valid"], splits["test"]


def assemble(train: Callable[[], Iterable[tuple[str, str]]] | None, evals: dict, make_eval_split, max_chars: int,
              build_dir: str | os.PathLike | None) -> tuple[dict[str, datasets.Dataset], CleaningReport]:
    """Stream the pairs of ``train()`` into a cleaned training split (skipped when ``train`` is
    None); turn every other split into an evaluation split with ``make_eval_split``."""
    splits = {s: make_eval_split(p) for s, p in evals.items()}
    report = CleaningReport()
    if train is not None:
        splits["train"], report = build_train_split(train, max_chars, build_dir)
    return splits, report


HUB_SPLITS = {"train": "train", "valid": "validation", "test": "test"}
_HUB_BATCH = 10_000  # rows read from a hub split at a time


def _hub_pairs(split, hub_id: str, split_name: str) -> Iterator[tuple[str, str]]:
    """``(en, fr)`` pairs of a hub split (a ``Dataset`` or a streamed ``IterableDataset``), read
    in batches of rows (never the whole column at once)."""
    wanted = [c for c in ("translation", "en", "fr") if c in (split.column_names or [])]
    if wanted:  # known columns (a streamed split may not know them before its first row)
        split = split.select_columns(wanted)
    checked = False
    for batch in split.iter(batch_size=_HUB_BATCH):
        if "translation" in batch:
            rows = batch["translation"]
            if not checked and rows and not {"en", "fr"} <= set(rows[0]):
                raise DataError(f"Hub dataset {hub_id!r}: its translations hold {sorted(rows[0])}, not 'en' and "
                                "'fr'; pick its English–French config (hub_id 'name:config').")
            yield from ((row["en"], row["fr"]) for row in rows)
        elif {"en", "fr"} <= set(batch):
            yield from zip(batch["en"], batch["fr"])
        else:
            raise DataError(f"Hub dataset {hub_id!r}, split {split_name!r}: no 'translation' column and no "
                            f"'en'/'fr' columns (it has {sorted(batch)}).")
        checked = True


def load_hub(hub_id: str | None, max_chars: int, build_dir: str | os.PathLike | None = None,
              with_train: bool = True, streaming: bool = True):
    """A dataset in the Hugging Face hub's format: an id (``wmt14:fr-en`` names a config after a
    colon) or a local folder of its files. Splits ``train``/``validation``/``test``, each with
    a ``translation`` column of ``{"en": ..., "fr": ...}`` (WMT, OPUS style) or ``en``/``fr``
    columns. Without ``streaming``, ``datasets`` first copies every split into its own cache as
    memory-mapped Arrow and the training pairs are read from it in batches; with it, the rows
    are read from the source files (or the network) as they are cleaned, and only minitrans's
    own cache holds the corpus: half the disk and no second pass for a large corpus."""
    if not hub_id:
        raise DataError("dataset 'hub' needs data.hub_id: a hub id such as 'wmt14:fr-en' (name:config) or a "
                        "local folder in the hub's format.")
    name, _, config = hub_id.partition(":") if not Path(hub_id).exists() else (hub_id, "", "")
    try:
        loaded = datasets.load_dataset(name, config or None, streaming=streaming)
    except Exception as err:  # the hub raises many types when offline or unknown
        raise DataError(
            f"Could not load hub dataset {hub_id!r} ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            "). A hub id needs the network (or the datasets cache); offline, point data.hub_id at a local folder "
            "in the hub's format, or use local files (dataset tsv or aligned).") from None
    for split_name in HUB_SPLITS.values():
        if split_name not in loaded:
            raise DataError(f"Hub dataset {hub_id!r} has no {split_name!r} split; it has {sorted(loaded)}.")
    evals = {split: list(_hub_pairs(loaded[name], hub_id, name)) for split, name in HUB_SPLITS.items()
             if split != "train"}
    next(_hub_pairs(loaded["train"], hub_id, "train"), None)  # a malformed split fails before any work
    train = lambda: _hub_pairs(loaded["train"], hub_id, "train")  # noqa: E731
    return assemble(train if with_train else None, evals, aligned_split, max_chars, build_dir)
