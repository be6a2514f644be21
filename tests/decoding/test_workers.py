"""Decoding workers: batches decoded at once on threads of their own (minitrans.decoding.workers)."""

from __future__ import annotations

import threading

import pytest
import torch

from conftest import run_main, synthetic_pairs
from minitrans import Translator
from minitrans.engines.native_engine import spread, token_batches
from minitrans.decoding.workers import WorkerPool, default_workers

SENTENCES = [e for e, _ in synthetic_pairs(30, seed=31)] + ["", "The cat.", "A dog and a dog and a dog and a dog."]


@pytest.fixture
def two_threads():
    """The process runs 2 intra-op threads during the test (as on a 2-core machine), then its own count."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def in_new_thread(fn):
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


def test_workers_run_their_own_thread_count_and_leave_everyone_elses(two_threads):
    pool = WorkerPool(2, 1)
    try:
        names_and_counts = list(pool.map(lambda _: (threading.current_thread().name, torch.get_num_threads()),
                                         range(8)))
    finally:
        pool.close()
    assert {count for _, count in names_and_counts} == {1}
    assert all(name.startswith("minitrans-decode") for name, _ in names_and_counts)
    assert torch.get_num_threads() == 2  # the caller
    assert in_new_thread(torch.get_num_threads) == 2  # a thread started later reads the process default


def test_an_error_in_a_worker_reaches_the_caller(two_threads):
    def fail_on_three(x: int) -> int:
        if x == 3:
            raise ValueError("three")
        return x

    pool = WorkerPool(2, 1)
    try:
        with pytest.raises(ValueError, match="three"):
            list(pool.map(fail_on_three, range(6)))
        assert list(pool.map(fail_on_three, [1, 2])) == [1, 2]  # and the pool still works
    finally:
        pool.close()


def test_spread_halves_the_largest_batches_until_every_worker_has_one():
    sources = [[5] * n for n in (3, 4, 5, 6, 7)]
    plan = token_batches(sources, max_tokens=1000, beam_size=1)
    assert len(plan) == 1
    spread_plan = spread(plan, 4)
    assert len(spread_plan) == 4
    assert sorted(i for b in spread_plan for i in b) == list(range(5))
    assert spread(plan, 2) == [plan[0][:2], plan[0][2:]]
    assert spread([[0], [1, 2]], 8) == [[0], [1], [2]]  # single sentences cannot be split further
    assert spread(plan, 1) == plan


def test_default_workers():
    assert default_workers("cpu", threads=1) == 1
    assert default_workers("cpu", threads=2) == 2
    assert default_workers("cpu", threads=16) == 2
    assert default_workers("meta", threads=16) == 1  # not a CPU: one worker


@pytest.mark.parametrize("beam,nbest", [(3, 1), (3, 2)])
def test_outputs_do_not_depend_on_the_number_of_workers(trained_checkpoint, two_threads, beam, nbest):
    one = Translator.from_checkpoint(trained_checkpoint, workers=1, max_tokens=120)
    two = Translator.from_checkpoint(trained_checkpoint, workers=2, max_tokens=120)
    assert (one.engine.workers, two.engine.workers) == (1, 2)
    ours = one.translate_detailed(SENTENCES, beam_size=beam, nbest=nbest)
    theirs = two.translate_detailed(SENTENCES, beam_size=beam, nbest=nbest)
    assert two.engine._pool is not None  # the workers did decode
    assert [[text for text, _ in r.nbest] for r in theirs] == [[text for text, _ in r.nbest] for r in ours]
    assert [s for r in theirs for _, s in r.nbest] == pytest.approx([s for r in ours for _, s in r.nbest], abs=1e-5)
    two.engine.close()
    assert two.translate(SENTENCES[:4], beam_size=beam) == one.translate(SENTENCES[:4], beam_size=beam)
    # One sentence is one batch: it is decoded by the caller, with all its threads.
    two.engine.close()
    two.translate(["The cat."], beam_size=beam)
    assert two.engine._pool is None


def test_greedy_search_runs_in_the_caller(trained_checkpoint, two_threads):
    two = Translator.from_checkpoint(trained_checkpoint, workers=2, max_tokens=120)
    one = Translator.from_checkpoint(trained_checkpoint, workers=1, max_tokens=120)
    assert two.translate(SENTENCES, beam_size=1) == one.translate(SENTENCES, beam_size=1)
    assert two.engine._pool is None  # no worker was started


def test_ctranslate2_workers_give_the_same_outputs(trained_checkpoint, tmp_path, two_threads):
    pytest.importorskip("ctranslate2", reason="the [ct2] extra (ctranslate2) is not installed")
    from minitrans.engines.ctranslate2_export import export_ctranslate2

    path = export_ctranslate2(trained_checkpoint, tmp_path / "model")
    one, two = Translator.from_export(path, workers=1), Translator.from_export(path, workers=2)
    assert two.engine.translator.num_translators == 2
    assert two.translate(SENTENCES, beam_size=3) == one.translate(SENTENCES, beam_size=3)


@pytest.mark.parametrize("value", ["-1", "two", "1.5"])
def test_cli_rejects_a_bad_worker_count_in_one_line(capsys, value):
    code, _, err = run_main(capsys, "translate", "-m", "missing.ckpt", "--workers", value, "hello")
    assert code == 2
    assert "argument --workers: must be a whole number" in err and value in err
    assert len(err.strip().splitlines()) == 1
