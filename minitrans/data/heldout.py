"""Held-out data: the sentences a model is scored on, with all their references.

A checkpoint records what it was trained on (``data`` in its metadata); :func:`eval_sets` turns
that into the sets it is scored on (every corpus of a mixture, with the split settings of
training, so a split minitrans makes is rebuilt exactly and cannot overlap training), and
:func:`load_eval_data` reads one set — a dataset split, or aligned ``--src``/``--ref`` files —
in the model's direction. ``evaluate``, ``calibrate`` and ``adapt``'s report read through here.
"""

from __future__ import annotations

from minitrans.data.corpus import read_aligned
from minitrans.data.sources import for_direction, load_corpus
from minitrans.errors import DataError
from minitrans.text.cleaning import clean

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
