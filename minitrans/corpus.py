"""Parallel English–French text: read, validate, clean, split.

Sources:
  * ``tatoeba``  — ``<data_dir>/tatoeba-fra-eng/fra.txt`` (``English<TAB>French``), no
    official split: we make a seeded one, grouped so that no sentence leaks.
  * ``multi30k`` — ``<data_dir>/multi30k/{split}.{en,fr}``, official splits.
  * ``tsv``      — any ``English<TAB>French`` file (split like Tatoeba unless the
    ``files`` mapping names valid/test files too).
  * ``aligned``  — any pair of line-aligned files ``PREFIX.en`` / ``PREFIX.fr`` per split.
  * ``hub``      — a dataset in the Hugging Face hub's format with a ``translation`` column
    of ``{"en": ..., "fr": ...}``: a hub id (``name:config``, needs the network or the
    datasets cache) or a local folder of its files (tests use one; nothing is downloaded).

Every split is a :class:`datasets.Dataset` with columns ``en`` (source), ``fr`` (first
reference) and ``refs`` (all French references of that English sentence).
"""

from __future__ import annotations

import logging
import os
import random
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import datasets

from minitrans.errors import DataError  # noqa: F401  (re-exported)
from minitrans.textio import iter_lines, read_lines

log = logging.getLogger(__name__)

DATA_ENV = "MINITRANS_DATA"
MULTI30K_SPLITS = {"train": "train", "valid": "val", "test": "test_2016_flickr",
                   "test_2017_flickr": "test_2017_flickr", "test_2017_mscoco": "test_2017_mscoco"}


def resolve_data_dir(configured: str | os.PathLike | None = None) -> Path:
    """The raw-corpus directory: ``$MINITRANS_DATA`` if set, else the configured one, else ``data/raw``."""
    value = os.environ.get(DATA_ENV) or configured or "data/raw"
    return Path(value).expanduser()


def clean(text: str) -> str:
    """Unicode NFC, every run of whitespace (NBSP and narrow NBSP included) to one space, stripped."""
    return " ".join(unicodedata.normalize("NFC", text).split())


DATA_HINT = (f"Point {DATA_ENV} (or data.data_dir) at the directory holding the corpora, e.g. "
             f"`export {DATA_ENV}=../shared/data`, or fetch them with `minitrans download`.")


def _require_file(path: Path, what: str, hint: str = DATA_HINT) -> None:
    if not path.is_file():
        raise DataError(f"{what} not found: {path}. {hint}")
    if path.stat().st_size == 0:
        raise DataError(f"{what} is empty: {path}. Replace it with a complete copy of the corpus.")


def read_tsv(path: str | os.PathLike) -> list[tuple[str, str]]:
    """Pairs from an ``English<TAB>French[<TAB>anything]`` file, raw (not cleaned).
    Lines are read as :mod:`minitrans.textio` reads them (``\n`` only, BOM dropped, UTF-8)."""
    path = Path(path)
    _require_file(path, "Parallel TSV file")
    pairs = []
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
            pairs.append((fields[0], fields[1]))
    if not pairs:
        raise DataError(f"{path} holds no sentence pairs (only blank lines).")
    return pairs


def read_aligned(src_path: str | os.PathLike, tgt_path: str | os.PathLike,
                 hint: str = DATA_HINT) -> list[tuple[str, str]]:
    """Pairs from two files aligned by line (line i of one translates line i of the other)."""
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    _require_file(src_path, "Source file", hint)
    _require_file(tgt_path, "Target file", hint)
    src = read_lines(src_path)
    tgt = read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(
            f"Aligned files differ in line count: {src_path} has {len(src)} lines, {tgt_path} has "
            f"{len(tgt)}. Each line of one must translate the same line of the other."
        )
    return list(zip(src, tgt))


@dataclass
class CleaningReport:
    """What cleaning dropped from the training split."""

    kept: int = 0
    dropped: Counter = field(default_factory=Counter)

    def __str__(self) -> str:
        dropped = ", ".join(f"{n} {why}" for why, n in sorted(self.dropped.items())) or "nothing"
        return f"kept {self.kept} pairs; dropped {dropped}"


def clean_train_pairs(pairs, max_chars: int = 400) -> tuple[list[tuple[str, str]], CleaningReport]:
    """Clean training pairs: normalise, drop empty, over-long and exact-duplicate pairs."""
    report, seen, out = CleaningReport(), set(), []
    for en, fr in pairs:
        en, fr = clean(en), clean(fr)
        if not en or not fr:
            report.dropped["empty"] += 1
        elif len(en) > max_chars or len(fr) > max_chars:
            report.dropped[f"longer than {max_chars} characters"] += 1
        elif (en, fr) in seen:
            report.dropped["exact duplicates"] += 1
        else:
            seen.add((en, fr))
            out.append((en, fr))
    report.kept = len(out)
    return out, report


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


def train_split(pairs) -> datasets.Dataset:
    return datasets.Dataset.from_dict({
        "en": [en for en, _ in pairs], "fr": [fr for _, fr in pairs], "refs": [[fr] for _, fr in pairs]})


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


def _assemble(pairs: dict, make_eval_split, max_chars: int) -> tuple[dict[str, datasets.Dataset], CleaningReport]:
    """Clean the ``train`` pairs into a training split; turn every other split into an
    evaluation split with ``make_eval_split``."""
    pairs = dict(pairs)
    train, report = clean_train_pairs(pairs.pop("train"), max_chars)
    return {"train": train_split(train), **{s: make_eval_split(p) for s, p in pairs.items()}}, report


def load_corpus(dataset: str, data_dir: str | os.PathLike | None = None, files: dict[str, str] | None = None,
                hub_id: str | None = None, valid_size: int = 1000, test_size: int = 2000, seed: int = 1,
                max_chars: int = 400) -> tuple[dict[str, datasets.Dataset], CleaningReport]:
    """Load and clean a corpus into splits (see the module docstring for the sources).

    Returns:
        ``({split name: Dataset}, report of what cleaning dropped from train)``.
    """
    root = resolve_data_dir(data_dir)
    files = dict(files or {})
    if dataset == "tatoeba":
        files.setdefault("train", str(root / "tatoeba-fra-eng" / "fra.txt"))
        dataset = "tsv"
    if dataset == "multi30k":
        pairs = {split: read_aligned(root / "multi30k" / f"{name}.en", root / "multi30k" / f"{name}.fr")
                 for split, name in MULTI30K_SPLITS.items()}
        return _assemble(pairs, aligned_split, max_chars)
    if dataset == "tsv":
        if "train" not in files:
            raise DataError("dataset 'tsv' needs data.files with at least a 'train' entry (a TSV path).")
        raw = {split: read_tsv(path) for split, path in files.items()}
        if "valid" in raw and "test" in raw:
            train_pairs = raw.pop("train")
        else:
            train_pairs, valid, test = grouped_split(raw.pop("train"), valid_size, test_size, seed)
            raw.setdefault("valid", valid)
            raw.setdefault("test", test)
        return _assemble({"train": train_pairs, **raw}, eval_split, max_chars)
    if dataset == "aligned":
        missing = {"train", "valid", "test"} - set(files)
        if missing:
            raise DataError(f"dataset 'aligned' needs data.files entries for {sorted(missing)} "
                            "(each a path prefix with PREFIX.en and PREFIX.fr beside it).")
        pairs = {split: read_aligned(f"{prefix}.en", f"{prefix}.fr") for split, prefix in files.items()}
        return _assemble(pairs, aligned_split, max_chars)
    if dataset == "hub":
        return _load_hub(hub_id, max_chars)
    raise DataError(f"Unknown dataset {dataset!r}; choose tatoeba, multi30k, tsv, aligned or hub.")


HUB_SPLITS = {"train": "train", "valid": "validation", "test": "test"}


def _load_hub(hub_id: str | None, max_chars: int):
    """A dataset in the Hugging Face hub's format: an id (``wmt14:fr-en`` names a config after a
    colon) or a local folder of its files. Splits ``train``/``validation``/``test``, each with
    a ``translation`` column of ``{"en": ..., "fr": ...}`` (WMT, OPUS style) or ``en``/``fr``
    columns."""
    if not hub_id:
        raise DataError("dataset 'hub' needs data.hub_id: a hub id such as 'wmt14:fr-en' (name:config) or a "
                        "local folder in the hub's format.")
    name, _, config = hub_id.partition(":") if not Path(hub_id).exists() else (hub_id, "", "")
    try:
        loaded = datasets.load_dataset(name, config or None)
    except Exception as err:  # the hub raises many types when offline or unknown
        raise DataError(
            f"Could not load hub dataset {hub_id!r} ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            "). A hub id needs the network (or the datasets cache); offline, point data.hub_id at a local folder "
            "in the hub's format, or use local files (dataset tsv or aligned).") from None
    out = {}
    for split, split_name in HUB_SPLITS.items():
        if split_name not in loaded:
            raise DataError(f"Hub dataset {hub_id!r} has no {split_name!r} split; it has {sorted(loaded)}.")
        columns = loaded[split_name].column_names
        if "translation" in columns:
            rows = loaded[split_name]["translation"]
            if rows and not {"en", "fr"} <= set(rows[0]):
                raise DataError(f"Hub dataset {hub_id!r}: its translations hold {sorted(rows[0])}, not 'en' and "
                                "'fr'; pick its English–French config (hub_id 'name:config').")
            out[split] = [(row["en"], row["fr"]) for row in rows]
        elif {"en", "fr"} <= set(columns):
            out[split] = list(zip(loaded[split_name]["en"], loaded[split_name]["fr"]))
        else:
            raise DataError(f"Hub dataset {hub_id!r}, split {split_name!r}: no 'translation' column and no "
                            f"'en'/'fr' columns (it has {columns}).")
    return _assemble(out, aligned_split, max_chars)
