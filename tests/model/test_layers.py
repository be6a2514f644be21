import math

import pytest
import torch

from minitrans.model.layers import FeedForward, PositionalEncoding, Residual, sinusoidal_table


@pytest.mark.parametrize("pos,i", [(0, 0), (1, 0), (7, 3), (50, 10), (99, 31)])
def test_sinusoidal_matches_paper_formula(pos, i):
    d = 64
    table = sinusoidal_table(100, d)
    angle = pos / 10000 ** (2 * i / d)
    assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
    assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_positional_encoding_offset_and_length_check():
    pe = PositionalEncoding(16, max_len=10).eval()
    x = torch.zeros(1, 4, 16)
    torch.testing.assert_close(pe(x, offset=3)[0], sinusoidal_table(10, 16)[3:7])
    with pytest.raises(ValueError, match="max_len"):
        pe(torch.zeros(1, 11, 16))


def test_learned_positions_are_parameters():
    pe = PositionalEncoding(16, max_len=10, learned=True)
    assert sum(p.numel() for p in pe.parameters()) == 160


def test_feed_forward_is_position_wise():
    ff = FeedForward(8, 32)
    x = torch.randn(2, 5, 8)
    full = ff(x)
    torch.testing.assert_close(full[:, 2], ff(x[:, 2:3])[:, 0])


def test_residual_post_and_pre_norm():
    x = torch.randn(2, 3, 8)
    double = lambda h: 2 * h  # noqa: E731
    post = Residual(8, 0.0, norm_first=False)
    pre = Residual(8, 0.0, norm_first=True)
    torch.testing.assert_close(post(x, double), post.norm(x + 2 * x))
    torch.testing.assert_close(pre(x, double), x + 2 * pre.norm(x))
