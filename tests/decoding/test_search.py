import pytest
import torch

from minitrans import ModelConfig, Transformer
from minitrans.decoding import search
from minitrans.decoding.search import beam_search, greedy_search, length_penalty, max_output_lengths, top_k
from minitrans.text.tokenizer import EOS_ID


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(1)
    cfg = ModelConfig(vocab_size=30, d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64,
                      dropout=0.0, max_len=40)
    m = Transformer(cfg).eval()
    with torch.no_grad():  # make eos moderately likely so hypotheses end at varied lengths
        m.src_embed.weight[EOS_ID] *= 3
    return m


@pytest.fixture(scope="module")
def src():
    g = torch.Generator().manual_seed(2)
    lengths = [3, 7, 5, 1, 6]
    out = torch.zeros(len(lengths), 8, dtype=torch.long)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(4, 30, (n,), generator=g)
        out[i, n] = EOS_ID
    return out


def test_greedy_cached_equals_recomputed(model, src):
    cached, full = greedy_search(model, src), greedy_search(model, src, use_cache=False)
    assert [h.tokens for h in cached] == [h.tokens for h in full]
    assert [h.score for h in cached] == pytest.approx([h.score for h in full], abs=1e-4)


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_gives_the_same_whenever_finished_rows_leave(model, src, use_cache, monkeypatch):
    """Finished rows decoded along until they are COMPACT_SHARE of the batch change nothing:
    dropped at once (0), at the default share, or only when all are done (1.0)."""
    results = []
    for share in (0.0, search.COMPACT_SHARE, 1.0):
        monkeypatch.setattr(search, "COMPACT_SHARE", share)
        results.append([(h.tokens, h.score) for h in greedy_search(model, src, use_cache=use_cache)])
    assert len({len(tokens) for tokens, _ in results[0]}) > 2  # sentences finish at different steps
    for other in results[1:]:
        assert [t for t, _ in other] == [t for t, _ in results[0]]
        assert [s for _, s in other] == pytest.approx([s for _, s in results[0]], abs=1e-5)


def test_beam_cached_equals_recomputed(model, src):
    cached = beam_search(model, src, beam_size=4, nbest=4)
    full = beam_search(model, src, beam_size=4, nbest=4, use_cache=False)
    assert [[h.tokens for h in hs] for hs in cached] == [[h.tokens for h in hs] for hs in full]
    assert [h.score for hs in cached for h in hs] == pytest.approx([h.score for hs in full for h in hs], abs=1e-4)


def test_beam_one_equals_greedy(model, src):
    greedy = greedy_search(model, src)
    beam = beam_search(model, src, beam_size=1, alpha=0.0)
    assert [h.tokens for h in greedy] == [hs[0].tokens for hs in beam]
    assert [h.logprob for h in greedy] == pytest.approx([hs[0].logprob for hs in beam], abs=1e-4)


def test_nbest_sorted_and_distinct(model, src):
    for hyps in beam_search(model, src, beam_size=5, nbest=5):
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True) and len(hyps) == 5
        assert len({tuple(h.tokens) for h in hyps}) == 5


def test_beam_finds_at_least_greedys_score(model, src):
    greedy = greedy_search(model, src)
    beam = beam_search(model, src, beam_size=5, alpha=0.0)
    for g, b in zip(greedy, beam):
        assert b[0].logprob >= g.logprob - 1e-4


def test_batched_equals_one_at_a_time(model, src):
    batched = beam_search(model, src, beam_size=3, nbest=3)
    for i in range(src.size(0)):
        row = src[i:i + 1, : int((src[i] != 0).sum())]
        alone = beam_search(model, row, beam_size=3, nbest=3)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[i]]
        assert [h.score for h in alone] == pytest.approx([h.score for h in batched[i]], abs=1e-4)
    assert [h.tokens for h in greedy_search(model, src[1:2])] == [greedy_search(model, src)[1].tokens]


def test_length_limit_forces_eos(model, src):
    limits = max_output_lengths(src, 0.0, 3, 100)
    assert limits.tolist() == [3] * 5
    for h in greedy_search(model, src, max_len_a=0.0, max_len_b=3):
        assert len(h.tokens) <= 2
    for hyps in beam_search(model, src, beam_size=3, max_len_a=0.0, max_len_b=3, nbest=3):
        assert all(len(h.tokens) <= 2 for h in hyps)


def test_length_penalty_form():
    assert length_penalty(1, 0.0) == 1.0
    assert length_penalty(7, 1.0) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="nbest"):
        beam_search(None, torch.zeros(1, 2, dtype=torch.long), beam_size=2, nbest=3)


@torch.no_grad()
def reference_beam_search(model, src_row, k, alpha, limit):
    """fairseq's beam search written plainly for one sentence: every prefix recomputed, the full
    log-softmax over the vocabulary, candidates sorted in Python. The reference for the batched,
    cached, top-k-per-beam implementation."""
    from minitrans.model.masks import padding_mask
    from minitrans.text.tokenizer import BOS_ID

    mask = padding_mask(src_row, 0)
    memory = model.encode(src_row, mask)
    beams, finished = [([], 0.0)], []
    for t in range(limit):
        candidates = []
        for b, (tokens, score) in enumerate(beams):
            logits = model.decode(memory, mask, torch.tensor([[BOS_ID] + tokens]))[0, -1].double()
            lp = torch.log_softmax(logits, -1)
            lp[0] = lp[BOS_ID] = float("-inf")
            if t + 1 == limit:
                lp = torch.where(torch.arange(lp.numel()) == EOS_ID, 0.0, float("-inf")).double()
            candidates += [(score + float(lp[v]), b, v) for v in range(lp.numel()) if torch.isfinite(lp[v])]
        top = sorted(candidates, key=lambda c: -c[0])[: 2 * k]
        for score, b, v in top[:k]:
            if v == EOS_ID and len(finished) < k:
                finished.append((beams[b][0], score / length_penalty(t + 1, alpha)))
        if len(finished) >= k or t + 1 >= limit:
            break
        beams = [(beams[b][0] + [v], score) for score, b, v in top if v != EOS_ID][:k]
    return sorted(finished, key=lambda f: -f[1])


@pytest.mark.parametrize("block", [64, 2, 4])  # 64: torch.topk over 30 columns; 2, 4: blockwise (4: a short last block)
@pytest.mark.parametrize("k,alpha", [(3, 1.0), (4, 0.0), (16, 1.0)])  # 16: 2K > 30 pieces, step 0 runs K rows
def test_beam_search_equals_a_plain_reference(model, src, k, alpha, block, monkeypatch):
    monkeypatch.setattr(search, "TOP_K_BLOCK", block)
    limits = max_output_lengths(src, 1.5, 10, model.config.max_len - 1).tolist()
    ours = beam_search(model, src, beam_size=k, alpha=alpha, nbest=k)
    for i, hyps in enumerate(ours):
        row = src[i:i + 1, : int((src[i] != 0).sum())]
        reference = reference_beam_search(model, row, k, alpha, limits[i])
        assert [h.tokens for h in hyps] == [tokens for tokens, _ in reference]
        assert [h.score for h in hyps] == pytest.approx([score for _, score in reference], abs=1e-4)


@pytest.mark.parametrize("k,first_rows", [(4, 1), (16, 16)])
def test_beam_search_runs_its_first_step_once_per_sentence(model, src, k, first_rows, monkeypatch):
    """Step 0 (every beam holds just <s>) decodes one row per sentence when that row alone can
    offer the 2K candidates (30 pieces: K = 4), then K rows; with 2K > 30 all K from the start."""
    rows, decode = [], model.decode

    def counting(memory, src_mask, tgt_ids, *args, **kwargs):
        rows.append(tgt_ids.size(0))
        return decode(memory, src_mask, tgt_ids, *args, **kwargs)

    monkeypatch.setattr(model, "decode", counting)
    beam_search(model, src, beam_size=k)
    assert rows[0] == len(src) * first_rows and len(rows) > 1
    assert all(r % k == 0 and r <= len(src) * k for r in rows[1:])  # then K rows per sentence still searched


@pytest.mark.parametrize("width,k", [(8000, 10), (8000, 1), (5003, 10), (1000, 5), (700, 10), (640, 10), (30, 4)])
def test_top_k_equals_torch_topk(width, k):
    g = torch.Generator().manual_seed(width + k)
    x = torch.randn(40, width, generator=g) * 4
    x[1] = float("-inf")  # a row at its length limit: one finite value (eos), the rest -inf
    x[1, 2] = 0.0
    x[2, -1] = 100.0  # the winner in the short last block
    x[3, :k + 3] = 50.0  # a tie for the top places
    x[4, ::7] = float("-inf")
    values, ids = top_k(x, k)
    ref_values, ref_ids = x.topk(k, dim=-1)
    assert torch.equal(values, ref_values)  # exactly, -inf included
    assert torch.equal(x.gather(1, ids), values)  # the columns hold those values
    untied = [r for r in range(40) if r not in (1, 3)]
    assert torch.equal(ids[untied], ref_ids[untied])  # random floats do not tie
    assert len(set(ids[3].tolist())) == k  # tied winners are distinct columns


def test_a_bf16_model_decodes_with_a_float32_cache(model, src, monkeypatch):
    """A bf16 model on a CPU keeps its keys and values in float32 (its steps attend in float32);
    a float32 model keeps its own format. The outputs stay those of the float32 model, up to
    bf16 rounding."""
    import copy

    bf16 = copy.deepcopy(model).bfloat16()
    assert search.cache_dtype(bf16) == torch.float32 and search.cache_dtype(model) is None
    made, real = [], Transformer.init_cache
    monkeypatch.setattr(Transformer, "init_cache", lambda self, *a: made.append(a[2]) or real(self, *a))
    for decode in (lambda m: [[h] for h in greedy_search(m, src)], lambda m: beam_search(m, src, beam_size=4)):
        ours, theirs = decode(bf16), decode(model)
        same = [(a[0].score, b[0].score) for a, b in zip(ours, theirs) if a[0].tokens == b[0].tokens]
        assert len(same) >= len(src) - 1
        assert [a for a, _ in same] == pytest.approx([b for _, b in same], abs=0.1)
    assert made == [torch.float32, None, torch.float32, None]
