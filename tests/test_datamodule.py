from minitrans.batching import Batch
from conftest import make_datamodule


def test_prepare_writes_cache_and_second_run_reuses_it(prepared, data_root):
    path = prepared.cache_path
    assert (path / "done.json").exists() and (path / "spm.model").exists()
    stamp = (path / "done.json").stat().st_mtime_ns
    again = make_datamodule(data_root, prepared.hparams.cache_dir)
    again.prepare_data()
    again.setup("fit")
    assert (path / "done.json").stat().st_mtime_ns == stamp  # not rebuilt (no wall-clock assert: noisy)
    assert again.tokenizer.fingerprint() == prepared.tokenizer.fingerprint()


def test_changed_settings_get_their_own_cache(prepared, data_root):
    other = make_datamodule(data_root, prepared.hparams.cache_dir, vocab_size=300)
    assert other.cache_path != prepared.cache_path


def test_statistics(prepared):
    stats = prepared.statistics()
    from conftest import synthetic_pairs

    assert stats["splits"]["train"]["pairs"] == len(set(synthetic_pairs(400)))  # exact duplicates dropped
    assert set(stats["splits"]) == {"train", "valid", "test", "test_2017_flickr", "test_2017_mscoco"}
    assert stats["vocab_size"] == 320
    assert 0 <= stats["train_padding_ratio"] < 0.2
    for key in ("src_mean", "src_p95", "tgt_mean", "tgt_p95"):
        assert stats["splits"]["valid"][key] > 0


def test_loaders_yield_batches_with_references(prepared):
    train = next(iter(prepared.train_dataloader()))
    assert isinstance(train, Batch) and train.refs is None
    val = next(iter(prepared.val_dataloader()))
    assert val.refs is not None and len(val.refs) == val.src.size(0)
    assert sum(b.src.size(0) for b in prepared.test_dataloader()) == 30
