"""Corpus sources, one class each: where a source's files are, how its splits are made, how
it is downloaded, and which files key the prepared-data cache.

========== ================================================================================
``tatoeba``  ``<data_dir>/tatoeba-fra-eng/fra.txt`` (``English<TAB>French``), no official
             split: a seeded one is made, grouped so that no sentence leaks (a ``tsv`` source)
``multi30k`` ``<data_dir>/multi30k/{split}.{en,fr}``, the official splits
``tsv``      any ``English<TAB>French`` file (split like Tatoeba unless ``files`` names
             valid/test files too)
``aligned``  any pair of line-aligned files ``PREFIX.en`` / ``PREFIX.fr`` per split
``hub``      a dataset in the Hugging Face hub's format (a hub id, or a local folder of its files)
========== ================================================================================

Adding a source is one class here plus one line in :data:`SOURCES`; :func:`load_corpus`, the
data module's cache key and ``minitrans download`` all read that table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import datasets

from minitrans.text.cleaning import CleaningReport
from minitrans.data.corpus import (MULTI30K_SPLITS, aligned_split, assemble, eval_split, grouped_split, iter_aligned,
                              iter_tsv, load_hub, read_aligned, read_tsv, resolve_data_dir, reverse_split)
from minitrans.errors import DataError


@dataclass(frozen=True)
class LoadRequest:
    """What :meth:`Source.load` is asked for: the data settings of a corpus (``files``,
    ``hub_id``, ``valid_size``, ``test_size``, ``seed``, ``max_chars``: as ``data.*`` names them)
    with its folder, and how to build (see :func:`load_corpus`)."""

    root: Path
    files: dict[str, str] = field(default_factory=dict)
    hub_id: str | None = None
    valid_size: int = 1000
    test_size: int = 2000
    seed: int = 1
    max_chars: int = 400
    build_dir: str | os.PathLike | None = None
    with_train: bool = True
    hub_streaming: bool = True


class Source:
    """One kind of corpus. ``files`` and ``hub_id`` are the data settings of the same names."""

    name = ""
    #: What the corpus is and its terms, as a model's card and an export's README state them
    #: ("" for a user's own files: their terms are the user's to state).
    licence = ""
    #: Evaluation splits with one row per English sentence and all its references
    #: (:func:`~minitrans.data.corpus.eval_split`), rather than official line-for-line ones.
    grouped = False

    def files(self, root: Path, files: dict[str, str], hub_id: str | None) -> list[Path]:
        """The raw files the corpus is read from: their sizes and times key the cache."""
        return [Path(p) for p in files.values()]

    def load(self, request: LoadRequest) -> tuple[dict[str, datasets.Dataset], CleaningReport]:
        """The corpus's splits (see :func:`load_corpus`)."""
        raise NotImplementedError

    def download(self, to: Path) -> Path:
        raise DataError(f"{self.name!r} cannot be downloaded by minitrans: choose {' or '.join(downloadable())}.")


class Tsv(Source):
    """``English<TAB>French`` lines; without valid and test files, a grouped seeded split."""

    name = "tsv"
    grouped = True

    def load(self, request):
        files, valid_size, test_size = request.files, request.valid_size, request.test_size
        if "train" not in files:
            raise DataError("dataset 'tsv' needs data.files with at least a 'train' entry (a TSV path).")
        iter_tsv(files["train"])  # checked at once, read while streaming
        evals = {split: read_tsv(path) for split, path in files.items() if split != "train"}
        if "valid" in evals and "test" in evals:
            train = lambda: iter_tsv(files["train"])  # noqa: E731
        else:
            pairs = read_tsv(files["train"])
            train_pairs, valid, test = grouped_split(pairs, valid_size, test_size, request.seed)
            if pairs and (not train_pairs or (not valid and "valid" not in evals)):  # a valid file given: its own
                n = len({en for en, _ in pairs})
                raise DataError(
                    f"data.files.train {files['train']} has {n} English sentences: too few for valid_size "
                    f"{valid_size} + test_size {test_size} and a training split ({len(train_pairs)} training and "
                    f"{len(valid)} validation pairs would be left). Set data.valid_size and data.test_size to "
                    f"about a tenth each (e.g. {max(1, n // 10)}), or give data.files.valid and data.files.test.")
            evals.setdefault("valid", valid)
            evals.setdefault("test", test)
            train = lambda: train_pairs  # noqa: E731
        return assemble(train if request.with_train else None, evals, eval_split, request.max_chars,
                        request.build_dir)


class Tatoeba(Tsv):
    """The Tatoeba export: a TSV at a known place."""

    name = "tatoeba"
    licence = "Tatoeba fra-eng (tatoeba.org, via manythings.org/anki), CC-BY 2.0 (France): attribution"

    def files(self, root, files, hub_id):
        return [root / "tatoeba-fra-eng" / "fra.txt"]

    def load(self, request):
        train = request.files.get("train") or str(request.root / "tatoeba-fra-eng" / "fra.txt")
        return super().load(replace(request, files={**request.files, "train": train}))

    def download(self, to):
        from minitrans.data.download import download_tatoeba

        return download_tatoeba(Path(to))


class Multi30k(Source):
    """The Multi30k benchmark's official splits."""

    name = "multi30k"
    licence = "Multi30k English–French (Elliott et al. 2016, 2017; Barrault et al. 2018), research use"

    @staticmethod
    def pair_paths(root: Path) -> dict[str, tuple[Path, Path]]:
        """``{split: (English file, French file)}`` under ``root/multi30k``."""
        return {split: (root / "multi30k" / f"{name}.en", root / "multi30k" / f"{name}.fr")
                for split, name in MULTI30K_SPLITS.items()}

    def files(self, root, files, hub_id):
        return [root / "multi30k" / f"{n}.{lang}" for n in MULTI30K_SPLITS.values() for lang in ("en", "fr")]

    def load(self, request):
        paths = self.pair_paths(request.root)
        train_paths = paths.pop("train")
        iter_aligned(*train_paths)  # a missing or empty training file fails before any work
        train = lambda: iter_aligned(*train_paths)  # noqa: E731
        evals = {split: read_aligned(*p) for split, p in paths.items()}
        return assemble(train if request.with_train else None, evals, aligned_split, request.max_chars,
                        request.build_dir)

    def download(self, to):
        from minitrans.data.download import download_multi30k

        return download_multi30k(Path(to))


class Aligned(Source):
    """Line-aligned ``PREFIX.en`` / ``PREFIX.fr`` files for train, valid and test."""

    name = "aligned"

    def files(self, root, files, hub_id):
        return [Path(f"{p}.{lang}") for p in files.values() for lang in ("en", "fr")]

    def load(self, request):
        files = request.files
        missing = {"train", "valid", "test"} - set(files)
        if missing:
            raise DataError(f"dataset 'aligned' needs data.files entries for {sorted(missing)} "
                            "(each a path prefix with PREFIX.en and PREFIX.fr beside it).")
        iter_aligned(f"{files['train']}.en", f"{files['train']}.fr")
        evals = {split: read_aligned(f"{prefix}.en", f"{prefix}.fr") for split, prefix in files.items()
                 if split != "train"}
        train = lambda: iter_aligned(f"{files['train']}.en", f"{files['train']}.fr")  # noqa: E731
        return assemble(train if request.with_train else None, evals, aligned_split, request.max_chars,
                        request.build_dir)


class Hub(Source):
    """A dataset in the Hugging Face hub's format: a hub id (keyed by its name only) or a local folder."""

    name = "hub"

    def files(self, root, files, hub_id):
        return sorted(p for p in Path(hub_id).rglob("*") if p.is_file()) if hub_id and Path(hub_id).is_dir() else []

    def load(self, request):
        return load_hub(request.hub_id, request.max_chars, request.build_dir, request.with_train, request.hub_streaming)


#: Every corpus source, by ``data.dataset`` name: one line per source.
SOURCES: dict[str, Source] = {s.name: s for s in (Tatoeba(), Multi30k(), Tsv(), Aligned(), Hub())}


def downloadable() -> list[str]:
    """The sources ``minitrans download`` can fetch: those with a ``download`` of their own."""
    return sorted(name for name, s in SOURCES.items() if type(s).download is not Source.download)


def source(name: str) -> Source:
    """The source called ``name``, or a DataError listing them."""
    if name not in SOURCES:
        raise DataError(f"Unknown dataset {name!r}; choose {', '.join(SOURCES)} (or mixture).")
    return SOURCES[name]


def source_files(dataset: str, data_dir: str | None, files: dict[str, str] | None,
                 hub_id: str | None = None) -> list[Path]:
    """The raw files a corpus is read from (their sizes and times key the cache)."""
    return source(dataset).files(resolve_data_dir(data_dir), dict(files or {}), hub_id)


def load_corpus(dataset: str, data_dir: str | os.PathLike | None = None, files: dict[str, str] | None = None,
                hub_id: str | None = None, valid_size: int = 1000, test_size: int = 2000, seed: int = 1,
                max_chars: int = 400, build_dir: str | os.PathLike | None = None,
                with_train: bool = True, hub_streaming: bool = True
                ) -> tuple[dict[str, datasets.Dataset], CleaningReport]:
    """Load and clean a corpus into splits, each a ``datasets.Dataset`` with columns ``en``,
    ``fr`` (first reference) and ``refs`` (all references).

    The training split is streamed from its file into Arrow (:mod:`minitrans.data.stream`): memory
    stays bounded however large it is, except for a ``tsv`` corpus without valid and test files,
    whose grouped split (:func:`~minitrans.data.corpus.grouped_split`) needs every pair in memory.

    Args:
        build_dir: Where the training split's Arrow files go (they must outlive the split);
            ``None`` keeps it in memory.
        with_train: ``False`` skips the training split when it is not needed to make the others
            (evaluation).
        hub_streaming: For ``hub``: read the splits with ``datasets``' streaming mode (an
            evaluation then reads only the split it needs).

    Returns:
        ``({split name: Dataset}, report of what cleaning dropped from train)``.
    """
    return source(dataset).load(LoadRequest(resolve_data_dir(data_dir), dict(files or {}), hub_id, valid_size,
                                            test_size, seed, max_chars, build_dir, with_train, hub_streaming))


def for_direction(dataset: str, splits: dict[str, datasets.Dataset], source_lang: str) -> dict[str, datasets.Dataset]:
    """``splits`` of ``dataset`` (as :func:`load_corpus` gives them) for a model whose source is
    ``source_lang``: for French, every evaluation split is turned around
    (:func:`~minitrans.data.corpus.reverse_split`), so that ``refs`` holds the target language.
    Training splits (``train``, ``<name>/train``) are pairs either way and stay as they are."""
    if source_lang == "en":
        return splits
    grouped = source(dataset).grouped
    return {key: ds if key.rsplit("/", 1)[-1] == "train" else reverse_split(ds, grouped) for key, ds in splits.items()}


def download(dataset: str, to: str | os.PathLike) -> Path:
    """Download a public corpus into ``to`` (the layout MINITRANS_DATA expects)."""
    return source(dataset).download(Path(to))
