import dataclasses

import pytest
import torch
import torch.nn.functional as F

from minitrans import ModelConfig, Transformer
from minitrans.model.masks import causal_mask, padding_mask


def ids(b, t, vocab=40):
    return torch.randint(4, vocab, (b, t))  # ids 0..3 are specials; never pad


@pytest.mark.parametrize("norm_first", [False, True])
def test_causality(tiny_config, norm_first):
    model = Transformer(dataclasses.replace(tiny_config, norm_first=norm_first)).eval()
    src, tgt = ids(2, 7), ids(2, 6)
    base = model(src, tgt)
    for t in range(6):
        changed = tgt.clone()
        changed[:, t + 1:] = ids(2, 5 - t) if t < 5 else changed[:, t + 1:]
        torch.testing.assert_close(model(src, changed)[:, : t + 1], base[:, : t + 1])
    # and the future does matter somewhere, or the test could not fail
    other = tgt.clone()
    other[:, 3] = (other[:, 3] + 1 - 4) % 36 + 4
    assert not torch.allclose(model(src, other)[:, 3:], base[:, 3:])


def test_padding_invariance(tiny_model):
    src, tgt = ids(2, 7), ids(2, 5)
    base = tiny_model(src, tgt)
    padded_src = torch.cat([src, torch.zeros(2, 4, dtype=torch.long)], 1)
    padded_tgt = torch.cat([tgt, torch.zeros(2, 3, dtype=torch.long)], 1)
    torch.testing.assert_close(tiny_model(padded_src, tgt), base, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tiny_model(src, padded_tgt)[:, :5], base, rtol=1e-5, atol=1e-5)


def test_alone_equals_inside_padded_batch(tiny_model):
    short_src, short_tgt = ids(1, 4), ids(1, 3)
    long_src, long_tgt = ids(1, 9), ids(1, 8)
    alone = tiny_model(short_src, short_tgt)
    batch_src = torch.cat([F.pad(short_src, (0, 5)), long_src])
    batch_tgt = torch.cat([F.pad(short_tgt, (0, 5)), long_tgt])
    torch.testing.assert_close(tiny_model(batch_src, batch_tgt)[:1, :3], alone, rtol=1e-5, atol=1e-5)


def test_every_parameter_gets_a_gradient(tiny_config):
    for cfg in (tiny_config, dataclasses.replace(tiny_config, share_embeddings=False, norm_first=True,
                                                  positional="learned")):
        model = Transformer(cfg)
        model(ids(2, 6), ids(2, 5)).sum().backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
        assert not missing, missing


def test_tied_embeddings_share_storage(tiny_model):
    assert tiny_model.src_embed.weight is tiny_model.tgt_embed.weight
    assert tiny_model.output_proj is None
    untied = Transformer(dataclasses.replace(tiny_model.config, share_embeddings=False))
    assert untied.src_embed.weight.data_ptr() != untied.tgt_embed.weight.data_ptr()


def test_encode_decode_compose_to_forward(tiny_model):
    src, tgt = ids(2, 7), ids(2, 5)
    mask = padding_mask(src, 0)
    logits, weights = tiny_model.decode(tiny_model.encode(src, mask), mask, tgt, need_weights=True)
    torch.testing.assert_close(logits, tiny_model(src, tgt))
    assert len(weights) == 2 and weights[0].shape == (2, 4, 5, 7)


def test_cached_decoding_equals_teacher_forcing(tiny_model):
    src, tgt = ids(2, 7), ids(2, 6)
    mask = padding_mask(src, 0)
    memory = tiny_model.encode(src, mask)
    full = tiny_model.decode(memory, mask, tgt)
    cache = tiny_model.init_cache()
    first = tiny_model.decode(memory, mask, tgt[:, :2], cache)  # a forced prefix of two
    steps = [tiny_model.decode(memory, mask, tgt[:, t:t + 1], cache) for t in range(2, 6)]
    torch.testing.assert_close(torch.cat([first, *steps], 1), full, rtol=1e-5, atol=1e-5)


def test_causal_mask_shapes():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert causal_mask(1, 4).tolist() == [[True, True, True, True]]


def test_tiny_model_overfits_reversal_quickly():
    """A 2-layer d_model=32 model learns to reverse sequences: near-zero loss, exact outputs."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=14, d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2,
                      d_ff=64, dropout=0.0, max_len=16)
    model = Transformer(cfg)
    bos, eos = 2, 3
    src = torch.randint(4, 14, (8, 6))
    tgt = torch.cat([torch.full((8, 1), bos), src.flip(1), torch.full((8, 1), eos)], 1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        loss = F.cross_entropy(model(src, tgt[:, :-1]).transpose(1, 2), tgt[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.01, loss.item()
    model.eval()
    out = torch.full((8, 1), bos)
    with torch.no_grad():
        for _ in range(7):
            out = torch.cat([out, model(src, out)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(out[:, 1:], tgt[:, 1:])
