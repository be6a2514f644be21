import os
import sys
from pathlib import Path

import pytest
import torch

from conftest import make_datamodule, one_line_error, run_main, synthetic_pairs
from minitrans.data.batching import Batch
from minitrans.checkpoint import CheckpointError, load_checkpoint, load_for_inference


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


# -- hostile cases (issue #14's first round) --------------------------------------------------
@pytest.mark.hostile
def test_11_a_swapped_tokenizer_is_caught(tmp_path, trained_checkpoint, prepared):
    from minitrans.text.tokenizer import Tokenizer

    checkpoint = load_checkpoint(trained_checkpoint)
    other = Tokenizer.train([f for _, f in synthetic_pairs(300, seed=77)] + ["zzz qqq"] * 5, 320)
    assert other.fingerprint() != prepared.tokenizer.fingerprint() and other.vocab_size == 320
    checkpoint["minitrans"]["tokenizer"] = other.to_tensor()
    checkpoint["minitrans"]["tokenizer_fingerprint"] = other.fingerprint()  # consistent with itself
    torch.save(checkpoint, tmp_path / "swapped.ckpt")
    with pytest.raises(CheckpointError, match="not the one its weights were trained with"):
        load_for_inference(tmp_path / "swapped.ckpt")


@pytest.mark.hostile
def test_12_a_filter_that_leaves_no_training_pair_is_an_error(capsys, tmp_path, prepared):
    from conftest import write_config

    cfg = write_config(tmp_path, prepared)
    code, _, err = run_main(capsys, "prepare", "--config", cfg, "--data.max_len", "2", "--data.cache_dir", tmp_path / "c")
    assert code == 1 and "No training pair" in one_line_error(err) and "max_len" in err


@pytest.mark.hostile
def test_16_two_prepares_at_once_both_succeed(tmp_path, data_root):
    """Two processes prepare the same fresh cache together: both end with the same complete cache."""
    import subprocess

    code = ("import sys; from conftest import make_datamodule; "
            f"dm = make_datamodule({str(data_root)!r}, {str(tmp_path / 'cache')!r}); dm.prepare_data(); dm.setup(); "
            "print(dm.cache_path, len(dm.splits['train']))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}  # tests/, for conftest
    env.pop("MINITRANS_DATA", None)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                              text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [r[1][-2000:] for r in results]
    assert results[0][0] == results[1][0]
    assert not [p for p in (tmp_path / "cache").iterdir() if ".tmp" in p.name]


@pytest.mark.hostile
def test_16b_a_second_build_waits_and_never_deletes_the_first_cache(tmp_path):
    """The race behind a flaky CI run: the second build checked, found no cache, then deleted
    the first's just-published one. Now the second waits, builds nothing, and the first's
    cache is untouched; a killed build's leftover folder is cleared by the next build."""
    import threading
    import time

    from minitrans.data import cache as datacache

    path = tmp_path / "cache" / "toy-0123456789ab"
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "toy-0123456789ab.tmp999999999").mkdir()  # a killed build's folder
    first_started, fills, returned = threading.Event(), [], {}

    def fill(name):
        def write(folder, scratch):
            fills.append(name)
            first_started.set()
            time.sleep(0.5)  # long enough for the second build to arrive
            (folder / "data.txt").write_text(name)
            return {"by": name}
        return write

    def run(name):
        returned[name] = datacache.build(path, fill(name))

    first = threading.Thread(target=run, args=("first",))
    first.start()
    first_started.wait(10)
    second = threading.Thread(target=run, args=("second",))
    second.start()
    first.join(20), second.join(20)
    assert fills == ["first"] and returned == {"first": True, "second": False}
    assert (path / "data.txt").read_text() == "first" and datacache.read_report(path)["by"] == "first"
    assert not [p for p in path.parent.iterdir() if ".tmp" in p.name]


# -- issue #59, item 18: a split the user does not want -----------------------------------------
def _own_data(tmp_path, n=300):
    from conftest import synthetic_pairs

    train = tmp_path / "mine.tsv"
    train.write_text("".join(f"{en}\t{fr}\n" for en, fr in synthetic_pairs(n, seed=59)), encoding="utf-8")
    valid = tmp_path / "valid.tsv"
    valid.write_text("".join(f"{en}\t{fr}\n" for en, fr in synthetic_pairs(20, seed=60)), encoding="utf-8")
    return train, valid


@pytest.mark.hostile
def test_no_test_split_wanted_is_simply_absent(tmp_path):
    """``data.test_size: 0`` with the user's own valid file: prepare and setup work (twice:
    the cache holds no empty split that fails the next run), and there is no test split."""
    from conftest import make_datamodule

    train, valid = _own_data(tmp_path)
    for _ in range(2):
        dm = make_datamodule(tmp_path, tmp_path / "cache", dataset="tsv",
                             files={"train": str(train), "valid": str(valid)}, test_size=0, valid_size=0,
                             vocab_size=320)
        dm.prepare_data()
        dm.setup("fit")
        assert "valid" in dm.splits and "test" not in dm.splits and len(dm.splits["train"]) > 200
    assert next(iter(dm.val_dataloader()))


@pytest.mark.hostile
def test_an_empty_validation_split_is_one_line(tmp_path):
    from conftest import make_datamodule

    from minitrans.errors import DataError

    train, valid = _own_data(tmp_path)
    valid.write_text("", encoding="utf-8")  # the user's valid file, empty
    dm = make_datamodule(tmp_path, tmp_path / "cache", dataset="tsv", files={"train": str(train), "valid": str(valid)},
                         test_size=0, valid_size=0, vocab_size=320)
    with pytest.raises(DataError, match="is empty"):
        dm.prepare_data()


def test_an_empty_split_an_older_cache_kept_is_read_as_absent(tmp_path):
    import datasets

    from minitrans.data.cache import is_empty_split

    datasets.Dataset.from_dict({"a": []}).save_to_disk(str(tmp_path / "test"))
    datasets.Dataset.from_dict({"a": [1]}).save_to_disk(str(tmp_path / "valid"))
    assert is_empty_split(tmp_path / "test") and not is_empty_split(tmp_path / "valid")
    with pytest.raises(IndexError):  # why: datasets cannot load what it saved
        datasets.load_from_disk(str(tmp_path / "test"))


@pytest.mark.hostile
def test_a_private_corpus_gives_a_private_cache(tmp_path):
    """Issue #59, item 3: the copies minitrans makes unasked are no more readable than what
    they came from (a chmod 600 corpus, tokenised into the data cache)."""
    import os
    import stat

    from conftest import make_datamodule

    train, valid = _own_data(tmp_path)
    for private in (True, False):
        os.chmod(train, 0o600 if private else 0o644)
        dm = make_datamodule(tmp_path, tmp_path / f"cache-{private}", dataset="tsv", test_size=0, valid_size=0,
                             files={"train": str(train), "valid": str(valid)}, vocab_size=320)
        dm.prepare_data()
        mode = stat.S_IMODE(os.stat(dm.cache_path).st_mode)
        assert (mode & 0o077 == 0) == private, oct(mode)


@pytest.mark.hostile
def test_a_cache_that_cannot_be_written_names_the_cache_not_its_temporary(tmp_path):
    """Issue #59, item 12, for the data cache: every OSError of the build's own folder is the one
    line naming the cache asked for."""
    from minitrans.data import cache as datacache
    from minitrans.errors import WriteError

    path = tmp_path / "cache" / "tsv-0123456789ab"

    def fill(folder, scratch):
        raise PermissionError(13, "Permission denied", str(folder / "train" / "data-00000.arrow"))

    with pytest.raises(WriteError, match=rf"^cannot write {path}: Permission denied") as err:
        datacache.build(path, fill)
    assert ".tmp" not in str(err.value) and not list(path.parent.glob("*.tmp*"))
