"""Prepacked matrix products against plain ``F.linear`` at decoding shapes (issue #29, item 3).

    python bench/prepack.py [--d-model 256 --d-ff 1024 --vocab 5000] [--threads 1,2] [--repeats 200]

The Linear layers of one decoding step of the ``quickstart`` model (d_model 256, d_ff 1024, a
5,000-piece output projection), at the rows a step multiplies: 80 (greedy over 80 sentences)
and 400 (beam 5 over 80). Each weight is laid out once for the CPU's GEMM library, as PyTorch
exposes it, and the product timed against ``F.linear`` on the same inputs:

* fp32: ``F.linear``; MKL's packed GEMM (``torch.ops.mkl._mkl_reorder_linear_weight`` +
  ``_mkl_linear``); oneDNN's (``torch.ops.mkldnn._reorder_linear_weight`` + ``_linear_pointwise``);
* bf16: ``F.linear`` on bf16 tensors (what ``--bf16`` runs); oneDNN's packed bf16 product
  (skipped on a CPU whose oneDNN has no bf16 kernels, where bf16 is emulated).

Weights are packed for the largest row count and also applied to half as many rows (live beams
shrink as sentences finish). Prints microseconds per product (the median of ``--repeats``, the
variants alternated within each repeat so that the noisy cores treat them alike), the speed-up
over ``F.linear`` of the same precision, and the largest difference from it.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=5000)
    parser.add_argument("--rows", default="80,400")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    d, ff, v = args.d_model, args.d_ff, args.vocab
    shapes = {"q/k/v/out (D→D)": (d, d), "fc1 (D→d_ff)": (d, ff), "fc2 (d_ff→D)": (ff, d), "output (D→V)": (d, v)}
    print(f"torch {torch.__version__}, MKL {torch.backends.mkl.is_available()}, oneDNN "
          f"{torch.backends.mkldnn.is_available()}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    print(f"{'threads':>7} {'rows':>5} {'layer':<16} {'packed for':>10} "
          f"{'fp32 F.linear':>13} {'MKL packed':>16} {'oneDNN packed':>16} {'bf16 F.linear':>13} {'oneDNN bf16':>16}")
    bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())  # else bf16 is emulated: its columns are skipped
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        for rows in [int(r) for r in args.rows.split(",")]:
            for name, (n_in, n_out) in shapes.items():
                w, b = torch.randn(n_out, n_in) / n_in ** 0.5, torch.randn(n_out)
                wb, bb = w.bfloat16(), b.bfloat16()
                mkl_w = torch.ops.mkl._mkl_reorder_linear_weight(w, rows)
                dnn_w = torch.ops.mkldnn._reorder_linear_weight(w, rows)
                dnn_wb = torch.ops.mkldnn._reorder_linear_weight(wb, rows) if bf16 else None
                for m in (rows, rows // 2):
                    x = torch.randn(m, n_in)
                    xb = x.bfloat16()
                    runs = {
                        "fp32": lambda: F.linear(x, w, b),
                        "mkl": lambda: torch.ops.mkl._mkl_linear(x, mkl_w, w, b, rows),
                        "dnn": lambda: torch.ops.mkldnn._linear_pointwise(x, dnn_w, b, "none", [], ""),
                        "bf16": lambda: F.linear(xb, wb, bb),
                        "dnn_bf16": lambda: torch.ops.mkldnn._linear_pointwise(xb, dnn_wb, bb, "none", [], ""),
                    }
                    if not bf16:
                        runs["bf16"] = runs["dnn_bf16"] = runs["fp32"]  # shown as "-"
                    reference, reference_bf16 = runs["fp32"](), runs["bf16"]().float()
                    diffs = {k: (f().float() - (reference_bf16 if "bf16" in k else reference)).abs().max().item()
                             for k, f in runs.items()}
                    times: dict[str, list[float]] = {k: [] for k in runs}
                    with torch.inference_mode():
                        for f in runs.values():  # warm up
                            for _ in range(5):
                                f()
                        for _ in range(args.repeats):
                            for k, f in runs.items():
                                started = time.perf_counter()
                                f()
                                times[k].append(time.perf_counter() - started)
                    us = {k: 1e6 * statistics.median(t) for k, t in times.items()}

                    def cell(k: str, base: str) -> str:
                        if not bf16 and "bf16" in k + base:
                            return "-"
                        return f"{us[k]:7.1f} ({us[base] / us[k]:4.2f}×)"
                    print(f"{threads:>7} {m:>5} {name:<16} {rows:>10} {us['fp32']:13.1f} {cell('mkl', 'fp32'):>16} "
                          f"{cell('dnn', 'fp32'):>16} {us['bf16'] if bf16 else float('nan'):13.1f} {cell('dnn_bf16', 'bf16'):>16}"
                          f"   max |diff| {max(diffs['mkl'], diffs['dnn']):.1e} / {diffs['dnn_bf16']:.1e}")


if __name__ == "__main__":
    main()
