"""Subword regularisation: training pairs resegmented by sampling, evaluation unchanged."""

from __future__ import annotations

import pytest

from conftest import make_datamodule
from minitrans.data.batching import ArrowPairDataset, PairDataset, SampledPairDataset
from minitrans.errors import DataError


@pytest.fixture(scope="module")
def sampled(prepared, data_root):
    dm = make_datamodule(data_root, prepared.hparams.cache_dir, subword_alpha=0.3)
    dm.setup("fit")  # the cache key ignores subword_alpha: the prepared cache is reused
    assert dm.cache_path == prepared.cache_path
    return dm


def test_training_pairs_are_resegmented_each_time(sampled):
    data = sampled.pair_dataset("train")
    assert isinstance(data, SampledPairDataset)
    en = data.en[0]
    draws = [data[0]["src_ids"] for _ in range(30)]
    assert len({tuple(d) for d in draws}) >= 3  # several segmentations of one sentence
    assert all(sampled.tokenizer.decode([d])[0] == en for d in draws)  # all spell the same text
    targets = {tuple(data[0]["tgt_ids"]) for _ in range(30)}
    assert len(targets) >= 2 and all(sampled.tokenizer.decode([list(t)])[0] == data.fr[0] for t in targets)


def test_evaluation_keeps_the_deterministic_segmentation(sampled, prepared):
    valid = sampled.pair_dataset("valid")
    assert type(valid) is PairDataset
    assert valid[3]["src_ids"] == prepared.pair_dataset("valid")[3]["src_ids"]
    assert type(prepared.pair_dataset("train")) is ArrowPairDataset  # alpha 0: off, read from the cache


def test_the_sampled_stream_follows_the_seed(sampled):
    first = [b.src.tolist() for b, _ in zip(sampled.train_dataloader(), range(3))]
    again = [b.src.tolist() for b, _ in zip(sampled.train_dataloader(), range(3))]
    assert first == again


def test_alpha_is_checked(data_root, tmp_path):
    with pytest.raises(DataError, match="subword_alpha"):
        make_datamodule(data_root, tmp_path, subword_alpha=1.5)
