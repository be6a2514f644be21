"""The small operations of a decoding step, timed alone at decoding shapes (issue #29).

    python bench/decode_ops.py [--threads 1] [--repeats 200]

Each line times one way of doing a step's piece of work against another, on random data of the
shapes a batch of the `quickstart` model (4 heads of 64) or `multi30k-small` (4 heads of 32, an
8,000-piece vocabulary) has, median microseconds of ``--repeats`` calls after a warm-up:

* attention of one query row (greedy) or of a sentence's 5 beam queries against a few dozen
  keys: PyTorch's fused kernel against :func:`minitrans.attention.inference_attention`, in bf16
  and in float32, and bf16 products over a strided view of a cache buffer against float32 ones;
* the source mask of cross-attention as a boolean mask (inverted, then ``masked_fill_``) against
  an additive one made once per batch (one ``add_``);
* a bf16 product laid out for oneDNN at 2, 25 and 428 rows (what a call costs however few its
  rows; beside it a float32 ``F.linear``, the BLAS's product), and its first call at a row count
  it has not seen (oneDNN makes a primitive per shape);
* attention over 2 to 20 keys, against the same keys zero-padded (and masked) to 13: ATen
  multiplies a batch of matrices with its own scalar loop when one product is under 400
  multiply-adds (one query row against up to 12 keys of 32 here), and with the BLAS above; and
  the heads of one row as one block-diagonal product instead of the product's batch;
* ``torch.softmax`` over rows shorter and longer than one AVX-512 vector (16 floats);
* the log-softmax over the vocabulary: reading bf16 logits itself against a float32 copy first;
* greedy's pick: a log-softmax then the top one, against a max and a log-sum-exp (what
  :func:`minitrans.search.greedy_search` needs: the best piece and its log-probability);
* beam search's candidates: a top-2K per beam row then a top-2K of those, against one top-2K
  over beam × vocabulary per sentence (what :func:`minitrans.search.beam_search` does).

Compare lines within one run: these machines are noisy.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def timed(fn, repeats: int) -> float:
    """Median microseconds of ``fn()`` (attention_cost's timer, which sits beside this script)."""
    from attention_cost import timed as seconds

    return 1e6 * seconds(fn, repeats)


def attention(repeats: int) -> None:
    from minitrans.attention import inference_attention

    print("attention (rows, heads, queries, keys, head width): fused kernel vs inference_attention")
    for rows, heads, queries, keys, width in ((400, 4, 1, 20, 64), (80, 4, 5, 20, 64), (428, 4, 1, 14, 32)):
        for dtype in (torch.bfloat16, torch.float32):
            q = torch.randn(rows, heads, queries, width, dtype=dtype)
            k, v = (torch.randn(rows, heads, keys, width, dtype=dtype) for _ in range(2))
            mask = torch.ones(rows, 1, 1, keys, dtype=torch.bool)
            fused = timed(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), repeats)
            lean = timed(lambda: inference_attention(q, k, v, mask), repeats)
            print(f"  {rows}x{heads}x{queries}x{keys}x{width} {str(dtype)[6:]:>8}: fused {fused:7.0f}  "
                  f"inference_attention {lean:7.0f}  ({fused / lean:.1f}x)")
    print("Q·Kᵀ of one query row against 15 keys (400 rows, 4 heads of 64): contiguous keys, and the first 15 "
          "positions of a 48-position cache buffer")
    q = torch.randn(400, 4, 1, 64)
    buffer = torch.randn(400, 4, 48, 64)
    for dtype in (torch.bfloat16, torch.float32):
        view, query = buffer.to(dtype)[:, :, :15], q.to(dtype)
        block = view.contiguous()
        print(f"  {str(dtype)[6:]:>8}: contiguous {timed(lambda: torch.matmul(query, block.transpose(-2, -1)), repeats):6.0f}  "
              f"strided view {timed(lambda: torch.matmul(query, view.transpose(-2, -1)), repeats):6.0f}")


def few_keys(repeats: int) -> None:
    from minitrans.attention import inference_attention

    print("inference_attention (bf16 queries, float32 keys, heads of 32) over n keys, and over the same keys "
          "zero-padded to 13 and masked: ATen's batched product loops by itself under 400 multiply-adds a matrix")
    for rows, heads, queries in ((428, 4, 1), (100, 4, 1)):
        cells = []
        for keys in (2, 6, 10, 12, 13, 14, 20):
            q = torch.randn(rows, heads, queries, 32).bfloat16()
            k, v = (torch.randn(rows, heads, keys, 32) for _ in range(2))
            mask = torch.ones(rows, 1, 1, keys, dtype=torch.bool)
            padded = max(keys, 13)
            kp, vp = (torch.zeros(rows, heads, padded, 32) for _ in range(2))
            kp[:, :, :keys], vp[:, :, :keys] = k, v
            mp = torch.zeros(rows, 1, 1, padded, dtype=torch.bool)
            mp[..., :keys] = True
            assert torch.allclose(inference_attention(q, k, v, mask), inference_attention(q, kp, vp, mp), atol=1e-5)
            plain = timed(lambda: inference_attention(q, k, v, mask), repeats)
            cells.append(f"{keys}: {plain:4.0f} / {timed(lambda: inference_attention(q, kp, vp, mp), repeats):4.0f}")
        print(f"  {rows}x{heads}x{queries}, keys: plain / padded  " + ",  ".join(cells))
    print("one query row's attention at 428 rows, 4 heads of 32, float32: heads as the product's batch (the "
          "engine) against heads as one block-diagonal product per row (R products of (4, 128) by (128, L): "
          "4x the multiply-adds, never under 400 a matrix)")
    eye = torch.eye(4).view(1, 4, 4, 1)
    cells = []
    for keys in (6, 12, 14, 25):
        q, k, v = torch.randn(428, 1, 128), torch.randn(428, keys, 128), torch.randn(428, keys, 128)
        qh = q.view(428, 1, 4, 32).transpose(1, 2)  # (R, H, 1, Dh)
        kh, vh = (x.view(428, keys, 4, 32).transpose(1, 2).contiguous() for x in (k, v))  # (R, H, L, Dh)

        def by_heads() -> torch.Tensor:
            weights = torch.softmax(torch.matmul(qh, kh.transpose(-2, -1)).mul_(32 ** -0.5), -1)
            return torch.matmul(weights, vh).transpose(1, 2).reshape(428, 1, 128)

        def block_diagonal() -> torch.Tensor:
            blocks = (q.view(428, 1, 4, 32) * eye).view(428, 4, 128)  # row h holds head h's query only
            weights = torch.softmax(torch.bmm(blocks, k.transpose(1, 2)).mul_(32 ** -0.5), -1)  # (R, H, L)
            out = torch.bmm(weights, v).view(428, 4, 4, 32)  # (R, H, H, Dh): head h's values in block h
            return out.diagonal(dim1=1, dim2=2).transpose(1, 2).reshape(428, 1, 128)

        assert torch.allclose(by_heads(), block_diagonal(), atol=1e-4)
        cells.append(f"{keys}: {timed(by_heads, repeats):4.0f} / {timed(block_diagonal, repeats):4.0f}")
    print("  keys: by heads / block-diagonal  " + ",  ".join(cells))


def masks(repeats: int) -> None:
    from minitrans.attention import inference_attention

    print("inference_attention with the source mask: boolean (inverted, masked_fill_) against the same formula "
          "adding a float mask kept per batch (one add_; not kept, docs/experiments.md)")

    def added(q, k, v, additive):
        """inference_attention with ``scores.add_(additive)`` in place of its masked_fill_."""
        scores = torch.matmul(q.to(k.dtype), k.transpose(-2, -1)).mul_(q.size(-1) ** -0.5).add_(additive)
        if scores.size(-1) >= 16:
            return torch.matmul(torch.softmax(scores, -1), v)
        weights = scores.sub_(scores.amax(-1, keepdim=True)).exp_()
        return torch.matmul(weights.div_(weights.sum(-1, keepdim=True)), v)

    for rows, heads, queries, keys, width in ((428, 4, 1, 14, 32), (428, 4, 1, 20, 32), (400, 4, 1, 20, 64),
                                              (85, 4, 5, 14, 32)):
        q = torch.randn(rows, heads, queries, width).bfloat16()
        k, v = (torch.randn(rows, heads, keys, width) for _ in range(2))
        mask = torch.ones(rows, 1, 1, keys, dtype=torch.bool)
        mask[::3, ..., keys - 3:] = False
        additive = torch.zeros(mask.shape).masked_fill_(~mask, torch.finfo(torch.float32).min)
        assert torch.equal(added(q, k, v, additive), inference_attention(q, k, v, mask))
        boolean = timed(lambda: inference_attention(q, k, v, mask), repeats)
        adding = timed(lambda: added(q, k, v, additive), repeats)
        print(f"  {rows}x{heads}x{queries}x{keys}x{width}: boolean {boolean:6.0f}  additive {adding:6.0f}  "
              f"({boolean / adding:.2f}x)")


def products(repeats: int) -> None:
    print("a bf16 product laid out for oneDNN (minitrans.prepack) at few rows: the call's fixed cost; and the first "
          "call at a row count not seen before (oneDNN makes a primitive per shape), median of 20 new counts")
    for out in (128, 384, 8000):
        weight = torch.ops.mkldnn._reorder_linear_weight(torch.randn(out, 128).bfloat16(), 400)
        calls = []
        for rows in (2, 25, 428):
            x = torch.randn(rows, 1, 128).bfloat16()
            plain, single = torch.randn(out, 128), x.float()
            calls.append(f"{rows} rows {timed(lambda: torch.ops.mkldnn._linear_pointwise(x, weight, None, 'none', [], ''), repeats):5.0f}"
                         f" (float32 F.linear {timed(lambda: F.linear(single, plain), repeats):5.0f})")
        first, second = [], []
        for rows in range(300, 320):
            x = torch.randn(rows, 1, 128).bfloat16()
            for times in (first, second):
                started = time.perf_counter()
                torch.ops.mkldnn._linear_pointwise(x, weight, None, "none", [], "")
                times.append(1e6 * (time.perf_counter() - started))
        print(f"  128 -> {out:5d}: {', '.join(calls)};  300-319 rows: first call {statistics.median(first):6.0f}, "
              f"second {statistics.median(second):6.0f}")


def softmax(repeats: int) -> None:
    print("torch.softmax over (1,712, keys) against amax, exp and a division (float32):")
    for keys in (8, 14, 15, 16, 20, 32):
        x = torch.randn(428, 4, 1, keys)

        def by_hand() -> torch.Tensor:
            e = (x - x.amax(-1, keepdim=True)).exp_()
            return e.div_(e.sum(-1, keepdim=True))

        print(f"  {keys:3d} keys: torch.softmax {timed(lambda: torch.softmax(x, -1), repeats):6.0f}  "
              f"by hand {timed(by_hand, repeats):6.0f}")


def vocabulary(repeats: int) -> None:
    from minitrans.search import top_k

    logits = (torch.randn(428, 8000) * 3).bfloat16()
    print("log-softmax over (428, 8,000) bf16 logits:")
    print(f"  log_softmax(dtype=float32) {timed(lambda: torch.log_softmax(logits, -1, dtype=torch.float32), repeats):7.0f}  "
          f"float() then log_softmax {timed(lambda: torch.log_softmax(logits.float(), -1), repeats):7.0f}  "
          f"float() then logsumexp {timed(lambda: torch.logsumexp(logits.float(), -1), repeats):7.0f}")
    x = logits.float()

    def pick_max() -> tuple[torch.Tensor, torch.Tensor]:
        values, columns = x.max(-1)
        return values - torch.logsumexp(x, -1), columns

    print(f"greedy's pick over (428, 8,000) float32 logits: log-softmax then top-1 "
          f"{timed(lambda: top_k(torch.log_softmax(x, -1), 1), repeats):7.0f}  "
          f"max and logsumexp {timed(pick_max, repeats):7.0f}")
    logprobs, scores = torch.log_softmax(logits.float(), -1), torch.randn(428 // 5 * 5 // 5, 5)
    rows = scores.numel()
    logprobs = logprobs[:rows]

    def per_beam():
        values, _ = top_k(logprobs, 10)  # (N*K, 2K)
        return (scores.view(-1, 1) + values).view(-1, 50).topk(10, dim=1)

    def per_sentence():
        return top_k((logprobs + scores.view(-1, 1)).view(-1, 5 * 8000), 10)

    print(f"beam 5 candidates ({rows // 5} sentences x 5 beams x 8,000 pieces): top-2K per beam then per sentence "
          f"{timed(per_beam, repeats):7.0f}  one top-2K over beam x vocabulary {timed(per_sentence, repeats):7.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (a decoding worker has one)")
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{args.threads} thread(s), median µs of {args.repeats} calls")
    with torch.inference_mode():
        attention(args.repeats)
        few_keys(args.repeats)
        masks(args.repeats)
        products(args.repeats)
        softmax(args.repeats)
        vocabulary(args.repeats)


if __name__ == "__main__":
    main()
