"""The per-step vocabulary work of beam search, alone: ``torch.topk`` against minitrans's blockwise
:func:`~minitrans.search.top_k`, and the normaliser as ``logsumexp`` against a ``log_softmax`` table,
on random (rows, vocabulary) logits. Median of 30 timings per operation, in milliseconds.

    python bench/benchmark_topk.py [--threads 2] [--shapes 500x8000x10,2000x8000x1]

A beam-5 batch of 6,000 tokens over ~15-piece sources holds about 400 rows (80 sentences × 5).
"""

from __future__ import annotations

import argparse
import time

import torch

from minitrans.search import top_k


def median_ms(fn, reps: int = 30) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[reps // 2] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--shapes", default="500x8000x10,500x5000x10,2000x8000x10,2000x8000x1",
                        help="comma-separated ROWSxVOCABxK")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for shape in args.shapes.split(","):
        rows, vocab, k = (int(n) for n in shape.split("x"))
        x = torch.randn(rows, vocab) * 3
        assert torch.equal(top_k(x, k)[0], x.topk(k, dim=-1)[0])
        timings = {
            "torch.topk": median_ms(lambda: x.topk(k, dim=-1)),
            "top_k (blocks)": median_ms(lambda: top_k(x, k)),
            "logsumexp": median_ms(lambda: torch.logsumexp(x, -1, keepdim=True)),
            "log_softmax": median_ms(lambda: torch.log_softmax(x, -1)),
        }
        print(f"{rows} x {vocab}, k={k}: " + ", ".join(f"{name} {ms:.2f} ms" for name, ms in timings.items()))


if __name__ == "__main__":
    main()
