import random

import pytest

from minitrans.data.batching import PairDataset, TokenBatchSampler, collate
from minitrans.text.tokenizer import BOS_ID, EOS_ID


def realistic_lengths(n=5000, seed=0):
    rng = random.Random(seed)  # sentence lengths like Multi30k: mean ~15, long tail
    return [max(2, min(80, int(rng.lognormvariate(2.6, 0.4)))) for _ in range(n)]


def test_batches_respect_budget_and_cover_every_example_once():
    lengths = realistic_lengths()
    sampler = TokenBatchSampler(lengths, max_tokens=1000, seed=1)
    batches = list(sampler)
    assert all(len(b) * max(lengths[i] for i in b) <= 1000 for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert len(sampler) == len(batches)


def test_padding_ratio_is_low_on_realistic_lengths():
    sampler = TokenBatchSampler(realistic_lengths(), max_tokens=4096, seed=1)
    assert sampler.padding_ratio() < 0.10
    naive = TokenBatchSampler(realistic_lengths(), max_tokens=4096, seed=1)
    naive._make_batches = lambda: [list(range(i, min(i + 64, 5000))) for i in range(0, 5000, 64)]
    assert naive.padding_ratio() > 0.3  # what random batching would waste


def test_same_seed_same_batches_and_epochs_differ():
    lengths = realistic_lengths(500)
    a, b = TokenBatchSampler(lengths, 500, seed=7), TokenBatchSampler(lengths, 500, seed=7)
    assert list(a) == list(b)
    first = list(a)
    a.set_epoch(1)
    assert list(a) != first


def test_ranks_get_disjoint_equal_shares():
    lengths = realistic_lengths(500)
    shards = [list(TokenBatchSampler(lengths, 500, seed=7, num_replicas=2, rank=r)) for r in (0, 1)]
    assert len(shards[0]) == len(shards[1])
    assert not ({i for b in shards[0] for i in b} & {i for b in shards[1] for i in b})


def test_skip_resumes_mid_epoch_once():
    sampler = TokenBatchSampler(realistic_lengths(500), 500, seed=7)
    full = list(sampler)
    sampler.skip = 3
    assert len(sampler) == len(full)  # the epoch keeps its length for Lightning's counters
    assert list(sampler) == full[3:]
    assert list(sampler) == full  # only once


def test_eval_order_is_sorted_without_shuffle():
    lengths = realistic_lengths(200)
    batches = list(TokenBatchSampler(lengths, 300, shuffle=False))
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat)


def test_collate_adds_bos_eos_and_pads():
    data = PairDataset([[5, 6], [7]], [[8], [9, 10, 11]], refs=[["a"], ["b", "c"]])
    batch = collate([data[0], data[1]])
    assert batch.src.tolist() == [[5, 6, EOS_ID], [7, EOS_ID, 0]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, 0, 0], [BOS_ID, 9, 10, 11]]
    assert batch.tgt_out.tolist() == [[8, EOS_ID, 0, 0], [9, 10, 11, EOS_ID]]
    assert batch.refs == [["a"], ["b", "c"]] and batch.index == [0, 1]
    assert data.lengths() == [3, 4]


def test_bad_budget():
    with pytest.raises(ValueError, match="max_tokens"):
        TokenBatchSampler([3], 0)


def test_sharded_evaluation_serves_every_batch_once_with_equal_step_counts():
    lengths = [3, 9, 4, 7, 2, 8, 5, 6, 1, 10, 3]
    whole = TokenBatchSampler(lengths, max_tokens=12, shuffle=False).all_batches()
    assert len(whole) % 3  # not a multiple of the ranks: some ranks need a padding batch
    shards = [list(TokenBatchSampler(lengths, 12, shuffle=False, num_replicas=3, rank=r, keep_all=True))
              for r in range(3)]
    assert len({len(s) for s in shards}) == 1  # DDP: every rank takes the same number of steps
    served = [b for s in shards for b in s if b]
    assert sorted(served) == sorted(whole)  # every batch once, none dropped
    assert sum(1 for s in shards for b in s if not b) == -len(whole) % 3
    assert collate([]) is None


def reference_batches(lengths, max_tokens, seed, shuffle=True, max_sentences=None, rows=None):
    """The batch plan written example by example over Python lists (the plan before it moved to
    NumPy): shuffle, stable sort by length, cut greedily, shuffle the batches."""
    order = list(rows) if rows is not None else list(range(len(lengths)))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(order)
    order.sort(key=lengths.__getitem__)
    batches, batch, longest = [], [], 0
    for i in order:
        new_longest = max(longest, lengths[i])
        if batch and ((len(batch) + 1) * new_longest > max_tokens or
                      (max_sentences is not None and len(batch) >= max_sentences)):
            batches.append(batch)
            batch, new_longest = [], lengths[i]
        batch.append(i)
        longest = new_longest
    if batch:
        batches.append(batch)
    if shuffle:
        rng.shuffle(batches)
    return batches


@pytest.mark.parametrize("seed", range(6))
def test_batch_plan_equals_the_example_by_example_reference(seed):
    rng = random.Random(seed)
    lengths = [rng.choice([1, 2, 3, 5, 8, 13, 40, 90, 200]) for _ in range(rng.randint(0, 700))]
    max_tokens = rng.choice([7, 64, 300, 2048])
    max_sentences = rng.choice([None, 1, 5, 17])
    rows = [rng.randrange(len(lengths)) for _ in range(len(lengths) + 50)] if lengths and seed % 2 else None
    for shuffle in (True, False):
        sampler = TokenBatchSampler(lengths, max_tokens, shuffle=shuffle, seed=seed, max_sentences=max_sentences,
                                    epoch_rows=(lambda epoch: rows) if rows else None)
        expected = reference_batches(lengths, max_tokens, seed, shuffle, max_sentences, rows)
        assert sampler.all_batches() == expected
        assert list(sampler) == expected
