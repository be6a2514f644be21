"""The decoder's kernels (minitrans/decoding/kernels.py): each speed-up against the paper's path it
replaces — the lean bf16 attention against a NumPy transcription, stacked Q/K/V projections
against three, the shortlist's projection against the full one's columns — and attaching them
changes neither the weights nor training."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from minitrans import ModelConfig, Transformer
from minitrans.model.attention import MultiHeadAttention
from minitrans.decoding.kernels import DecodingAttention, for_decoding, inference_attention, projection
from minitrans.model.masks import causal_mask
from conftest import numpy_attention


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("queries", [1, 5, 9])
@pytest.mark.parametrize("keys", [11, 20])  # softmaxed by hand below SHORT_ROWS, by torch.softmax above
def test_inference_attention_equals_the_formula(dtype, tol, queries, keys):
    """The lean formula against the NumPy transcription, with a padding mask; bf16 within its
    ~3 significant digits."""
    g = torch.Generator().manual_seed(queries)
    q, k, v = (torch.randn(3, 4, n, 16, generator=g) for n in (queries, keys, keys))
    mask = torch.ones(3, 1, 1, keys, dtype=torch.bool)
    mask[1, ..., 7:] = False
    ours = inference_attention(q.to(dtype), k.to(dtype), v.to(dtype), mask)
    theirs, _ = numpy_attention(q.double().numpy(), k.double().numpy(), v.double().numpy(), mask.numpy())
    assert ours.dtype == dtype
    np.testing.assert_allclose(ours.double().numpy(), theirs, rtol=tol, atol=tol)


def test_inference_attention_converts_queries_to_the_keys_format():
    q, k, v = torch.randn(2, 4, 1, 16).bfloat16(), torch.randn(2, 4, 6, 16), torch.randn(2, 4, 6, 16)
    out = inference_attention(q, k, v)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, inference_attention(q.float(), k, v))


def test_bf16_decoding_on_cpu_takes_the_lean_formula(monkeypatch):
    """No gradient, bf16 weights on a CPU: inference_attention, never the fused kernel (several
    times slower there); float32 keeps the fused kernel; the paper's module keeps the fused
    kernel for bf16 too."""
    calls = []
    fused_kernel = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or fused_kernel(*a, **k))
    mha = for_decoding(MultiHeadAttention(32, 4).eval())
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        reference, _ = mha(x, x, x, causal_mask(5))
        assert calls == [1]
        mha.bfloat16()
        lean, _ = mha(x.bfloat16(), x.bfloat16(), x.bfloat16(), causal_mask(5))
        assert calls == [1] and lean.dtype == torch.bfloat16
        paper = MultiHeadAttention(32, 4).eval().bfloat16()
        paper.load_state_dict(mha.state_dict())
        paper(x.bfloat16(), x.bfloat16(), x.bfloat16(), causal_mask(5))
    assert calls == [1, 1]
    torch.testing.assert_close(lean.float(), reference, rtol=0.05, atol=0.05)


def test_stacked_projections_equal_three_and_training_is_the_papers():
    torch.manual_seed(0)
    paper = MultiHeadAttention(32, 4).eval()
    fast = for_decoding(MultiHeadAttention(32, 4).eval())
    fast.load_state_dict(paper.state_dict())
    x, y = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    with torch.no_grad():
        torch.testing.assert_close(fast(x, x, x, causal_mask(5))[0], paper(x, x, x, causal_mask(5))[0])
        torch.testing.assert_close(fast(x, y, y)[0], paper(x, y, y)[0])
    assert "_stacked" in fast.__dict__ and "_stacked" not in fast.state_dict()
    paper.train(), fast.train()
    assert torch.equal(fast(x, x, x)[0], paper(x, x, x)[0])  # with gradients: the same operators


def test_attaching_is_in_place_idempotent_and_keeps_the_checkpoint_format(tiny_config):
    model = Transformer(tiny_config).eval()
    keys = list(model.state_dict())
    assert for_decoding(for_decoding(model)) is model
    attention = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert attention and all(type(m) is DecodingAttention for m in attention)
    assert list(model.state_dict()) == keys


@pytest.mark.parametrize("tied", [True, False])
def test_a_shortlists_projection_is_the_full_ones_columns(tied):
    config = ModelConfig(vocab_size=40, d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, d_ff=64,
                         dropout=0.0, share_embeddings=tied)
    model = Transformer(config).eval()
    vocab = torch.tensor([0, 3, 7, 12, 39])
    x = torch.randn(2, 3, 32)
    with torch.no_grad():
        torch.testing.assert_close(projection(model, vocab)(x), model.project(x)[..., vocab])
