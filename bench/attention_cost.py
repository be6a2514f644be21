"""Attention's quadratic cost, measured: time and memory of self-attention against sequence length.

    python bench/attention_cost.py [--lengths 64,128,256,512,1024,2048] [--d-model 256 --heads 4] \\
        [--plot docs/attention-cost.png]

For each length T, one batch of self-attention over (1, H, T, d_k) queries, keys and values:
minitrans's explicit ``scaled_dot_product_attention`` (the formula, materialising the (T, T)
weights) and PyTorch's fused ``F.scaled_dot_product_attention``, median of 9 timings each; the
memory is the size of the weight matrix the formula materialises, ``H × T × T`` float32 numbers.
Doubling T quadruples both (the point of the docs' attention page); the fused kernel is faster
but has the same quadratic work.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from minitrans.model.attention import scaled_dot_product_attention


def timed(fn, repeats: int = 9) -> float:
    """Median wall seconds of ``fn()`` (one warm-up call first)."""
    fn()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="64,128,256,512,1024,2048")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--plot", help="write the two curves to this PNG")
    args = parser.parse_args()
    torch.manual_seed(0)
    d_k = args.d_model // args.heads
    rows = []
    print(f"threads {torch.get_num_threads()}, d_model {args.d_model}, {args.heads} heads of {d_k}")
    print(f"{'T':>6} {'explicit ms':>12} {'fused ms':>9} {'weights MiB':>12}")
    with torch.inference_mode():
        for length in map(int, args.lengths.split(",")):
            q, k, v = (torch.randn(1, args.heads, length, d_k) for _ in range(3))
            explicit = timed(lambda: scaled_dot_product_attention(q, k, v))
            fused = timed(lambda: F.scaled_dot_product_attention(q, k, v))
            mib = args.heads * length * length * 4 / 2**20
            rows.append((length, explicit * 1e3, fused * 1e3, mib))
            print(f"{length:>6} {explicit * 1e3:>12.2f} {fused * 1e3:>9.2f} {mib:>12.1f}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from minitrans.text.textio import atomic_output

        fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(9, 3.4))
        lengths = [r[0] for r in rows]
        ax_t.loglog(lengths, [r[1] for r in rows], "o-", label="explicit softmax(QKᵀ/√d_k)V")
        ax_t.loglog(lengths, [r[2] for r in rows], "s-", label="fused F.scaled_dot_product_attention")
        ax_t.set_xlabel("sequence length T")
        ax_t.set_ylabel("ms per self-attention")
        ax_t.legend(fontsize=8)
        ax_m.loglog(lengths, [r[3] for r in rows], "o-", color="C2")
        ax_m.set_xlabel("sequence length T")
        ax_m.set_ylabel("MiB of attention weights (H×T×T)")
        for ax in (ax_t, ax_m):
            ax.grid(True, which="both", alpha=0.3)
        fig.suptitle(f"self-attention cost, d_model {args.d_model}, {args.heads} heads, "
                     f"{torch.get_num_threads()} CPU threads", fontsize=10)
        fig.tight_layout()
        with atomic_output(args.plot, "wb") as f:
            fig.savefig(f, dpi=110, format="png")
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
