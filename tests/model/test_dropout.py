"""minitrans.model.dropout against the definition of inverted dropout and against nn.Dropout."""

import pytest
import torch

from minitrans.model.dropout import Dropout, dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drop_rate_and_scale_match_the_definition(p):
    torch.manual_seed(0)
    x = torch.rand(400_000) + 1.0  # never zero, so a zero output means a dropped element
    y = dropout(x, p)
    dropped = y == 0
    rate = dropped.float().mean().item()
    assert abs(rate - p) < 4 * (p * (1 - p) / x.numel()) ** 0.5 + 2e-5  # binomial 4-sigma band
    kept = ~dropped
    p_used = round(p * 65536) / 65536  # the documented rounding
    assert abs(p_used - p) <= 0.5 / 65536
    torch.testing.assert_close(y[kept], x[kept] / (1 - p_used))
    # Unbiased: E[y] = E[x], as nn.Dropout's inverted scaling gives.
    assert abs(y.mean().item() / x.mean().item() - 1) < 0.01


def test_statistics_agree_with_nn_dropout():
    torch.manual_seed(1)
    x = torch.rand(200_000) + 1.0
    ours, theirs = dropout(x, 0.3), torch.nn.functional.dropout(x, 0.3, True)
    assert abs((ours == 0).float().mean() - (theirs == 0).float().mean()) < 0.01
    torch.testing.assert_close(ours[ours != 0] * (1 - 19661 / 65536), x[ours != 0])


def test_gradient_is_mask_times_scale():
    torch.manual_seed(2)
    x = torch.randn(3, 7, 16, requires_grad=True)
    y = dropout(x, 0.3)
    y.backward(torch.ones_like(y))
    expected = (y != 0).float() * (65536 / (65536 - 19661))
    torch.testing.assert_close(x.grad, expected)


def test_identity_in_eval_and_at_zero_and_zeros_at_one():
    x = torch.randn(5, 9)
    module = Dropout(0.3).eval()
    assert module(x) is x
    assert dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Dropout(1.5)


def test_masks_follow_the_seed_and_keep_shape_and_dtype():
    x = torch.randn(4, 5, 33, dtype=torch.bfloat16)  # odd element count: the last int16 is unused
    torch.manual_seed(3)
    a = dropout(x, 0.2)
    torch.manual_seed(3)
    b = dropout(x, 0.2)
    c = dropout(x, 0.2)
    assert a.shape == x.shape and a.dtype == torch.bfloat16
    assert torch.equal(a, b) and not torch.equal(a, c)
