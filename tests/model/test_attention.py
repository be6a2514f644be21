import numpy as np
import pytest
import torch
import torch.nn.functional as F

from minitrans.model.attention import MultiHeadAttention, scaled_dot_product_attention
from minitrans.model.cache import AttentionCache
from minitrans.model.masks import causal_mask

from conftest import numpy_attention


def random_qkv(b=2, h=3, lq=5, lk=7, d=8):
    return torch.randn(b, h, lq, d), torch.randn(b, h, lk, d), torch.randn(b, h, lk, d)


def test_matches_numpy_transcription():
    q, k, v = random_qkv()
    out, w = scaled_dot_product_attention(q, k, v)
    ref_out, ref_w = numpy_attention(q.double().numpy(), k.double().numpy(), v.double().numpy())
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["none", "padding", "causal"])
def test_matches_torch_sdpa(kind):
    q, k, v = random_qkv(lq=6, lk=6)
    mask = None
    if kind == "padding":
        mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
        mask[0, ..., 4:] = False
    elif kind == "causal":
        mask = causal_mask(6)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 6))
    if mask is not None:
        assert (w.masked_select(~mask.expand_as(w)) == 0).all()  # exactly zero


def test_fully_masked_row_is_finite_and_zero():
    q, k, v = random_qkv(lq=2, lk=3)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert (w[..., 1, :] == 0).all() and (out[..., 1, :] == 0).all()
    torch.testing.assert_close(w[..., 0, :].sum(-1), torch.ones(2, 3))


def test_gradient_flows_through_explicit_path():
    q, k, v = (t.requires_grad_() for t in random_qkv())
    out, _ = scaled_dot_product_attention(q, k, v, causal_mask(5, 7))
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0 for t in (q, k, v))


def copy_to_torch_mha(mha: MultiHeadAttention, d_model: int, n_heads: int) -> torch.nn.MultiheadAttention:
    ref = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
        ref.out_proj.weight.copy_(mha.out_proj.weight)
        ref.out_proj.bias.copy_(mha.out_proj.bias)
    return ref.eval()


@pytest.mark.parametrize("fused", [True, False])
def test_multihead_matches_torch_multihead_attention(fused):
    d, h = 32, 4
    mha = MultiHeadAttention(d, h, use_fused=fused).eval()
    ref = copy_to_torch_mha(mha, d, h)
    x, mem = torch.randn(3, 5, d), torch.randn(3, 7, d)
    keep = torch.ones(3, 7, dtype=torch.bool)
    keep[1, 5:] = False
    ours, w = mha(x, mem, mem, keep[:, None, None, :], need_weights=True)
    # torch's masks mean the opposite: True = NOT allowed.
    theirs, their_w = ref(x, mem, mem, key_padding_mask=~keep, average_attn_weights=False)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(w, their_w, rtol=1e-5, atol=1e-6)
    # self-attention with a causal mask
    ours, none = mha(x, x, x, causal_mask(5))
    assert none is None
    theirs, _ = ref(x, x, x, attn_mask=~causal_mask(5))
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_fused_path_equals_explicit_path():
    mha = MultiHeadAttention(32, 4, use_fused=True).eval()
    x = torch.randn(2, 6, 32)
    mask = causal_mask(6)
    fused, none = mha(x, x, x, mask)
    explicit, w = mha(x, x, x, mask, need_weights=True)
    assert none is None and w.shape == (2, 4, 6, 6)
    torch.testing.assert_close(fused, explicit, rtol=1e-5, atol=1e-5)


def test_auto_takes_the_fused_kernel_on_cpu_only_without_gradients(monkeypatch):
    calls = []
    fused_kernel = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or fused_kernel(*a, **k))
    mha = MultiHeadAttention(32, 4).eval()  # use_fused None: auto
    x = torch.randn(2, 5, 32)
    trained, _ = mha(x, x, x, causal_mask(5))  # gradients on: the explicit formula (faster to train here)
    assert calls == [] and trained.requires_grad
    with torch.no_grad():
        decoded, _ = mha(x, x, x, causal_mask(5))
    assert calls == [1]
    torch.testing.assert_close(decoded, trained.detach(), rtol=1e-5, atol=1e-5)


def test_fused_path_close_to_explicit_under_bf16_autocast():
    mha = MultiHeadAttention(64, 4, use_fused=True).eval()
    x = torch.randn(2, 9, 64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused, _ = mha(x, x, x, causal_mask(9))
        explicit, _ = mha(x, x, x, causal_mask(9), need_weights=True)
    # bf16 keeps ~3 significant digits; measured max difference here is ~1e-2.
    torch.testing.assert_close(fused.float(), explicit.float(), rtol=0.05, atol=0.05)


@pytest.mark.parametrize("fused", [True, False])
def test_growing_cache_equals_full_self_attention(fused):
    mha = MultiHeadAttention(32, 4, use_fused=fused).eval()
    x = torch.randn(2, 6, 32)
    full, _ = mha(x, x, x, causal_mask(6))
    cache = AttentionCache(static=False)
    steps = [mha(x[:, t:t + 1], x[:, t:t + 1], x[:, t:t + 1], None, cache)[0] for t in range(6)]
    assert cache.length == 6
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-5, atol=1e-5)


def test_static_cache_is_computed_once():
    mha = MultiHeadAttention(32, 4).eval()
    mem = torch.randn(2, 7, 32)
    cache = AttentionCache(static=True)
    q1 = torch.randn(2, 1, 32)
    a, _ = mha(q1, mem, mem, None, cache)
    key = cache.key
    b, _ = mha(q1, torch.zeros_like(mem), torch.zeros_like(mem), None, cache)  # key/value ignored now
    assert cache.key is key
    torch.testing.assert_close(a, b)


def test_auto_path_is_explicit_on_cpu(monkeypatch):
    calls = []
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1))
    mha = MultiHeadAttention(32, 4).eval()
    x = torch.randn(1, 3, 32)
    mha(x, x, x)
    assert calls == []


def test_heads_must_divide_width():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(30, 4)


# -- a float32 cache for bf16 keys ------------------------------------------------------------
@pytest.mark.parametrize("static", [False, True])
def test_a_float32_cache_holds_bf16_keys_in_float32(static):
    mha = MultiHeadAttention(32, 4).eval().bfloat16()
    x = torch.randn(2, 6, 32).bfloat16()
    with torch.no_grad():
        full, _ = mha(x, x, x, None if static else causal_mask(6))
        cache = AttentionCache(static=static, dtype=torch.float32)
        steps = [mha(x[:, t:t + 1], x, x, None, cache)[0] if static else
                 mha(x[:, t:t + 1], x[:, t:t + 1], x[:, t:t + 1], None, cache)[0] for t in range(6)]
    assert cache.key.dtype == torch.float32 and cache.length == 6
    out = torch.cat(steps, 1)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), full.float(), rtol=0.05, atol=0.05)


def test_a_reorder_leaves_contiguous_keys_after_the_next_append():
    """select copies the filled positions into a buffer with room for one more, so the keys a
    beam step attends over are one block; the rows are the ones asked for, in order."""
    cache = AttentionCache(static=False, capacity=20)
    first = torch.randn(5, 4, 3, 8)
    cache.append(first, first + 1)
    assert not cache.key.is_contiguous()  # a view of the 20-position buffer
    rows = torch.tensor([4, 0, 0, 2])
    cache.select(rows)
    torch.testing.assert_close(cache.key, first[rows])
    torch.testing.assert_close(cache.value, first[rows] + 1)
    step = torch.randn(4, 4, 1, 8)
    key, value = cache.append(step, step)
    assert key.is_contiguous() and value.is_contiguous() and cache.length == 4
    torch.testing.assert_close(key, torch.cat([first[rows], step], 2))
    more = torch.randn(4, 4, 2, 8)
    key, _ = cache.append(more, more)  # outgrows the room: the buffer grows, nothing is lost
    torch.testing.assert_close(key, torch.cat([first[rows], step, more], 2))


@pytest.mark.parametrize("dtype", [None, torch.float32])
def test_a_static_cache_lays_its_keys_out_contiguously(dtype):
    """The heads split from a projection are a strided view; the cache copies them once, so no
    decoding step's product copies them again."""
    mha = MultiHeadAttention(32, 4).eval()
    mem = torch.randn(2, 7, 32)
    cache = AttentionCache(static=True, dtype=dtype)
    with torch.no_grad():
        out, _ = mha(torch.randn(2, 1, 32), mem, mem, None, cache)
    assert cache.key.is_contiguous() and cache.value.is_contiguous() and cache.key.dtype == torch.float32
    torch.testing.assert_close(cache.key, mha.k_proj(mem).view(2, 7, 4, 8).transpose(1, 2))


def test_the_first_cross_attention_step_attends_over_the_cache_copies():
    """The step that fills a float32 cache for a bf16 model attends over the cache's float32
    copies, as every later step does: the same query gives the same output at both steps (it
    attended over the projections' bf16 keys before, whose scores were rounded to bf16)."""
    mha = MultiHeadAttention(32, 4).eval().bfloat16()
    memory, query = torch.randn(2, 7, 32).bfloat16(), torch.randn(2, 1, 32).bfloat16()
    cache = AttentionCache(static=True, dtype=torch.float32)
    with torch.no_grad():
        first, _ = mha(query, memory, memory, None, cache)
        second, _ = mha(query, memory, memory, None, cache)
    torch.testing.assert_close(first, second, rtol=0, atol=0)
