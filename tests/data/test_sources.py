"""`dataset: hub`, offline: a local folder in the Hugging Face hub's format (parquet files)."""

from __future__ import annotations

import datasets
import pytest

from conftest import make_datamodule, synthetic_pairs
from minitrans.data.sources import load_corpus
from minitrans.errors import DataError


def write_hub_folder(root, column: str = "translation", sizes=(120, 20, 20)):
    for (split, n), seed in zip(zip(("train", "validation", "test"), sizes), (1, 2, 3)):
        pairs = synthetic_pairs(n, seed=seed)
        rows = {"translation": [{"en": e, "fr": f} for e, f in pairs]} if column == "translation" else \
            {"en": [e for e, _ in pairs], "fr": [f for _, f in pairs]}
        (root / "data").mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_dict(rows).to_parquet(str(root / "data" / f"{split}-00000-of-00001.parquet"))
    return root


@pytest.mark.parametrize("column", ["translation", "en/fr"])
def test_a_local_hub_folder_loads_offline(tmp_path, monkeypatch, column):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    folder = write_hub_folder(tmp_path / "hubset", column)
    splits, report = load_corpus("hub", hub_id=str(folder))
    assert sorted(splits) == ["test", "train", "valid"]
    assert len(splits["valid"]) == 20 and len(splits["test"]) == 20
    assert report.kept == len(splits["train"]) <= 120  # duplicates of the template corpus dropped
    e, f = synthetic_pairs(20, seed=3)[0]
    assert splits["test"][0]["en"] == e and splits["test"][0]["refs"] == [f]


def test_a_hub_corpus_trains_through_the_data_module(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    folder = write_hub_folder(tmp_path / "hubset")
    dm = make_datamodule(tmp_path / "unused", tmp_path / "cache", dataset="hub", hub_id=str(folder), vocab_size=320)
    dm.prepare_data()
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert batch.src.size(0) > 0 and len(dm.splits["valid"]) == 20


def test_hub_ids_name_a_config_after_a_colon(monkeypatch):
    calls = []

    def fake_load(name, config=None, streaming=False):
        calls.append((name, config, streaming))
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    with pytest.raises(DataError, match="offline, point data.hub_id at a local folder"):
        load_corpus("hub", hub_id="wmt14:fr-en")
    with pytest.raises(DataError):
        load_corpus("hub", hub_id="opus_books", hub_streaming=False)
    assert calls == [("wmt14", "fr-en", True), ("opus_books", None, False)]


@pytest.mark.parametrize("column", ["translation", "en/fr"])
def test_streaming_a_hub_corpus_gives_the_same_splits(tmp_path, monkeypatch, column):
    """Streamed rows come from the parquet files themselves, not from datasets' Arrow copy."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    folder = write_hub_folder(tmp_path / "hubset", column)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    streamed, streamed_report = load_corpus("hub", hub_id=str(folder), build_dir=tmp_path / "s")
    assert not list((tmp_path / "hf-cache").rglob("*.arrow"))  # no converted copy of the corpus
    copied, copied_report = load_corpus("hub", hub_id=str(folder), hub_streaming=False, build_dir=tmp_path / "c")
    assert list((tmp_path / "hf-cache").rglob("*.arrow"))  # the check above can fail
    assert str(streamed_report) == str(copied_report)
    for name in ("train", "valid", "test"):
        assert streamed[name].to_list() == copied[name].to_list(), name


@pytest.mark.parametrize("streaming", [False, True])
def test_hub_data_without_english_french_is_refused(tmp_path, streaming):
    root = tmp_path / "deen"
    (root / "data").mkdir(parents=True)
    for split in ("train", "validation", "test"):
        datasets.Dataset.from_dict({"translation": [{"de": "Hallo", "en": "Hello"}]}).to_parquet(
            str(root / "data" / f"{split}-00000-of-00001.parquet"))
    with pytest.raises(DataError, match="pick its English–French config"):
        load_corpus("hub", hub_id=str(root), hub_streaming=streaming)
