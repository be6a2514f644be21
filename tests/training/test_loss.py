"""The training loss (minitrans.training.loss: output projection + label-smoothed cross-entropy in blocks)
against PyTorch's own ``F.cross_entropy(F.linear(...))``, and the padding-free states that feed it."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from minitrans import Transformer
from minitrans.training.loss import projected_smoothed_loss


def reference(states, weight, gold, epsilon):
    logits = F.linear(states, weight).float()
    return (F.cross_entropy(logits, gold, reduction="sum", label_smoothing=epsilon),
            F.cross_entropy(logits, gold, reduction="sum"))


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("block", [1, 7, 37, 512])  # one row a block, a ragged last block, one block
def test_value_and_gradients_equal_torch_cross_entropy(epsilon, block):
    states = torch.randn(37, 16, requires_grad=True)
    weight = torch.randn(11, 16, requires_grad=True)
    gold = torch.randint(0, 11, (37,))
    loss, nll, n = projected_smoothed_loss(states, weight, gold, epsilon, block=block)
    ref, ref_nll = reference(states, weight, gold, epsilon)
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(nll, ref_nll)
    assert n == 37 and not nll.requires_grad
    scale = torch.tensor(0.37)  # the incoming gradient is the caller's (1 / number of tokens)
    ours = torch.autograd.grad(loss * scale, (states, weight))
    theirs = torch.autograd.grad(ref * scale, (states, weight))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b)


def test_bf16_states_as_under_autocast():
    """bf16 states (CPU autocast) and a float32 weight: the projection in bf16 as F.linear does
    under autocast, the loss in float32; gradients within bf16's precision of the reference."""
    states = torch.randn(300, 32).bfloat16().requires_grad_()
    weight = (0.2 * torch.randn(50, 32)).requires_grad_()
    gold = torch.randint(0, 50, (300,))
    loss, _, _ = projected_smoothed_loss(states, weight, gold, 0.1, block=64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref, _ = reference(states, weight, gold, 0.1)
    torch.testing.assert_close(loss, ref, rtol=1e-4, atol=1e-3)
    ours = torch.autograd.grad(loss / 300, (states, weight))
    theirs = torch.autograd.grad(ref / 300, (states, weight))
    assert ours[0].dtype == torch.bfloat16 and ours[1].dtype == torch.float32
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-4)


def test_without_gradients_gives_the_same_value():
    states, weight, gold = torch.randn(20, 8), torch.randn(30, 8), torch.randint(0, 30, (20,))
    with torch.no_grad():
        loss, nll, _ = projected_smoothed_loss(states, weight, gold, 0.1, block=6)
    ref, ref_nll = reference(states, weight, gold, 0.1)
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(nll, ref_nll)


def test_large_logits_stay_finite():
    states = torch.tensor([[100.0, 0.0], [0.0, 0.0], [-50.0, 3.0]], requires_grad=True)
    weight = torch.tensor([[10.0, 0.0], [0.0, 1.0], [-10.0, 0.0]], requires_grad=True)  # logits up to ±1000
    gold = torch.tensor([2, 0, 1])
    loss, _, _ = projected_smoothed_loss(states, weight, gold, 0.1)
    ref, _ = reference(states, weight, gold, 0.1)
    torch.testing.assert_close(loss, ref)
    assert all(torch.isfinite(g).all() for g in torch.autograd.grad(loss, (states, weight)))


@pytest.mark.parametrize("share_embeddings", [True, False])
def test_parameter_gradients_equal_the_padded_reference(tiny_config, share_embeddings):
    """The training loss (padding dropped before the projection, the blocked loss) gives every
    parameter the gradient of PyTorch's cross-entropy over every padded position with
    ignore_index: the two paths share nothing but the model."""
    torch.manual_seed(3)
    model = Transformer(dataclasses.replace(tiny_config, dropout=0.0, share_embeddings=share_embeddings))
    src, tgt_in, tgt_out = torch.randint(4, 40, (4, 7)), torch.randint(4, 40, (4, 6)), torch.randint(4, 40, (4, 6))
    src[2, 4:] = 0
    tgt_in[0, 2:], tgt_out[0, 2:] = 0, 0
    tgt_out[3, 5:] = 0
    rows = tgt_out != 0
    loss, _, n = projected_smoothed_loss(model.states(src, tgt_in)[rows], model.output_weight, tgt_out[rows], 0.1,
                                         block=5)
    ours = torch.autograd.grad(loss / n, list(model.parameters()))
    ref = F.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten(), ignore_index=0, label_smoothing=0.1)
    theirs = torch.autograd.grad(ref, list(model.parameters()))
    assert n == int(rows.sum()) == 19
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
