"""The training loss: the output projection and label-smoothed cross-entropy (section 5.4 of the
paper) as one operation, over blocks of target positions.

Written as ``F.cross_entropy(F.linear(states, W), gold, label_smoothing=ε)``, a step makes a
(positions × vocabulary) logits block, a log-softmax of it, a zero-filled gradient for the NLL, a
log-softmax backward and an add of the two loss branches: five fresh blocks of 50 MB for a
2,500-token batch and a 5,000-piece vocabulary. glibc hands blocks that large straight back to
the kernel, so every one of them is faulted in again at each step: on a fp32 step of the ``xs``
model (an EPYC with AVX-512-BF16 capped to AVX2) that chain was a quarter of the step
(``bench/benchmark_train.py --profile``: log-softmax
backward 9%, forward 5%, ``fill_`` 7%, ``add`` 7%), most of it page faults, not arithmetic.

Here the positions go through in blocks of ``BLOCK_ROWS``, in one set of block buffers (a few MB)
reused from block to block. For each block the forward makes the logits, their softmax, the loss terms, and,
while training, the gradient at once, since it has a closed form: ``softmax(z) - q`` with
``q = (1 - ε)·onehot(gold) + ε/V``, from which the gradients of the states (``g W``) and of the
weight (``gᵀ x``) follow. The backward only scales them by the incoming gradient. This is the
"fused linear cross-entropy" of GPU training libraries (Liger-Kernel, Apple's Cut Cross-Entropy),
written for minitrans because theirs are GPU kernels. Tested against ``F.cross_entropy`` for the
value and both gradients, in fp32 and bf16.

The caller passes only the target positions that count (no padding): the projection and the
loss spend nothing on padding.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor

from minitrans.text.vocab import PAD_ID

#: Target positions per block: 512 × a 5,000-piece vocabulary is 10 MB in float32, and a large
#: enough matrix product to run near the CPU's peak (128 to 4,096 measured: docs/speed.md).
BLOCK_ROWS = 512


class _ProjectedSmoothedLoss(torch.autograd.Function):
    """Summed label-smoothed cross-entropy of ``states @ weightᵀ`` against gold ids."""

    @staticmethod
    def forward(ctx, states: Tensor, weight: Tensor, gold: Tensor, epsilon: float, block: int
                ) -> tuple[Tensor, Tensor]:
        want_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        n_all, vocab = states.size(0), weight.size(0)
        low = states.dtype != torch.float32  # bf16 (or fp16) states under autocast
        w = weight.to(states.dtype)  # (V, D): the states' precision, as F.linear under autocast
        w_mean = weight.float().mean(dim=0)  # (D,): mean over the vocabulary of z = x Wᵀ is x · mean(W)
        loss = torch.zeros((), dtype=torch.float32, device=states.device)
        nll = torch.zeros((), dtype=torch.float32, device=states.device)
        grad_states = torch.empty_like(states) if want_grad else None  # (N, D)
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if want_grad else None
        # One set of block buffers, reused: fresh ones cost a page fault per 4 KB at every block
        rows = min(block, n_all)
        new = partial(torch.empty, device=states.device)
        logits = new(rows, vocab, dtype=states.dtype)  # (rows, V)
        logits32 = new(rows, vocab, dtype=torch.float32) if low else logits
        probs = new(rows, vocab, dtype=torch.float32)
        dlogits = new(rows, vocab, dtype=states.dtype) if low else probs
        with torch.autocast(states.device.type, enabled=False):
            for start in range(0, n_all, block):
                x, g = states[start:start + block], gold[start:start + block]  # (n, D), (n,)
                n = x.size(0)
                z = torch.mm(x, w.t(), out=logits[:n])  # (n, V)
                if low:
                    z = logits32[:n].copy_(z)  # scored in float32
                z_max = z.amax(dim=-1)  # (n,)
                z_gold = z.gather(1, g.unsqueeze(1)).squeeze(1)  # (n,)
                z_mean = torch.mv(x.float(), w_mean)  # (n,) = z.mean(-1), without a pass over z
                p = torch.softmax(z, dim=-1, out=probs[:n])  # (n, V)
                # log-sum-exp from the largest probability (≥ 1/V, so its log never underflows)
                lse = z_max - p.amax(dim=-1).log()  # (n,)
                nll_rows = lse - z_gold  # (n,) -log p(gold)
                loss += ((1.0 - epsilon) * nll_rows + epsilon * (lse - z_mean)).sum()
                nll += nll_rows.sum()
                if want_grad:
                    p.sub_(epsilon / vocab)
                    p[torch.arange(n, device=p.device), g] -= 1.0 - epsilon  # dLoss/dz (n, V)
                    dz = dlogits[:n].copy_(p) if low else p
                    torch.mm(dz, w, out=grad_states[start:start + block])  # (n, D)
                    if low:
                        grad_weight += torch.mm(dz.t(), x).float()  # (V, D)
                    else:
                        grad_weight.addmm_(dz.t(), x)
        ctx.save_for_backward(grad_states, grad_weight)
        ctx.weight_dtype = weight.dtype
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad: Tensor, _grad_nll: Tensor):
        grad_states, grad_weight = ctx.saved_tensors
        if grad_states is None:
            raise RuntimeError("projected_smoothed_loss was computed without gradients (under no_grad)")
        return (grad_states * grad.to(grad_states.dtype), (grad_weight * grad).to(ctx.weight_dtype),
                None, None, None)


def projected_smoothed_loss(states: Tensor, weight: Tensor, gold: Tensor, epsilon: float,
                            block: int = BLOCK_ROWS) -> tuple[Tensor, Tensor, int]:
    """Label-smoothed cross-entropy and plain NLL of the logits ``states @ weightᵀ``, summed.

    Equal to ``F.cross_entropy(F.linear(states, weight), gold, label_smoothing=ε,
    reduction="sum")``: ``(1 - ε) · NLL + ε · mean over the vocabulary of -log p``, with the
    gradients of both ``states`` and ``weight``, without a (N, V) block in memory.

    Args:
        states: (N, D) decoder states of the N target positions that count (no padding), in the
            precision the projection runs in (bf16 under CPU autocast); the logits are scored in
            float32.
        weight: (V, D) output projection (the tied target embedding).
        gold: (N,) target ids.
        epsilon: Label smoothing ε.
        block: Positions per block.

    Returns:
        ``(summed smoothed loss, summed NLL (no gradient), N)``.
    """
    loss, nll = _ProjectedSmoothedLoss.apply(states, weight, gold, float(epsilon), block)
    return loss, nll.detach(), gold.numel()


def teacher_forced_loss(model, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, epsilon: float,
                        pad_id: int = PAD_ID, block: int = BLOCK_ROWS) -> tuple[Tensor, Tensor, int]:
    """The training loss of a :class:`~minitrans.model.transformer.Transformer` on one batch: the
    decoder's states at the target positions that are not padding, projected and scored by
    :func:`projected_smoothed_loss`. Training, the size probe and the benchmark all call this.

    Args:
        src: (B, S) source ids; tgt_in: (B, T) decoder input; tgt_out: (B, T) gold ids,
            ``pad_id`` where padded.

    Returns:
        ``(summed smoothed loss, summed NLL (no gradient), number of target tokens)``.
    """
    rows = tgt_out != pad_id  # (B, T): the positions that count
    states = model.states(src, tgt_in)[rows]  # (N, D)
    return projected_smoothed_loss(states, model.output_weight, tgt_out[rows], epsilon, block)
