"""Training-step throughput (target tokens/s) on real Multi30k batches, side by side:
fp32 vs bf16 autocast, explicit vs fused attention, with the time the data loader takes.

    MINITRANS_DATA=../shared/data python bench/benchmark_train.py [--steps 20] [--d-model 256 --layers 3]
    MINITRANS_DATA=../shared/data python bench/benchmark_train.py --settings "bf16 explicit" --allocator default
    MINITRANS_DATA=../shared/data python bench/benchmark_train.py --settings "bf16 explicit" --allocator tuned
    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
      MINITRANS_DATA=../shared/data python bench/benchmark_train.py --settings "fp32 explicit" --peak --profile

``--peak`` also times a large fp32 matrix product (the machine's fp32 peak as PyTorch reaches it)
and says what share of it each setting's step reaches: matrix FLOPs of a step counted as
6 x (encoder weights x padded source tokens + (decoder weights + output projection) x padded
target tokens), attention's products included.

The allocator setting (see minitrans.runtime) is process-wide, so compare it across two runs,
alternated; the script prints the process's system CPU time (page faults) beside the rate.

Each setting trains a fresh model on the same batches in one process; the first steps are
warm-up and not counted. Compare ratios: these machines are noisy.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.nn.functional as F

from minitrans import ModelConfig, Transformer
from minitrans.datamodule import TranslationDataModule

SETTINGS = {  # name: (bf16 autocast, fused attention)
    "fp32 explicit": (False, False),
    "bf16 explicit": (True, False),
    "bf16 fused": (True, True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--d-ff", type=int, default=None, help="feed-forward width (default 4 x d-model)")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--vocab-size", type=int, default=5000)
    parser.add_argument("--max-tokens", type=int, default=2500)
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated subset of: " + ", ".join(SETTINGS))
    parser.add_argument("--allocator", choices=["default", "tuned"], default="default",
                        help="glibc malloc as it is, or as MINITRANS_MALLOC=tuned sets it (minitrans.runtime)")
    parser.add_argument("--peak", action="store_true", help="report each step's share of fp32 matrix peak")
    parser.add_argument("--profile", action="store_true",
                        help="also print torch.profiler's top operators for each setting")
    args = parser.parse_args()
    if args.allocator == "tuned":
        from minitrans.runtime import tune_allocator

        print("allocator tuned:", tune_allocator(force=True))
    dm = TranslationDataModule("multi30k", vocab_size=args.vocab_size, max_tokens=args.max_tokens)
    dm.prepare_data()
    dm.setup("fit")
    started = time.perf_counter()
    epoch = list(dm.train_dataloader())  # a whole epoch: batch planning + collation
    per_batch_ms = 1000 * (time.perf_counter() - started) / len(epoch)
    print(f"data loader: {per_batch_ms:.2f} ms per batch over a {len(epoch)}-batch epoch "
          "(collation in the training process)")
    batches = epoch[: args.steps + args.warmup]
    peak = matmul_peak() if args.peak else None
    if peak:
        print(f"fp32 matrix peak here: {peak:.1f} GFLOP/s (2048 x 2048 products, {torch.get_num_threads()} threads)")
    for name in args.settings.split(","):
        bf16, fused = SETTINGS[name.strip()]
        torch.manual_seed(0)
        cfg = ModelConfig(vocab_size=args.vocab_size, d_model=args.d_model, n_heads=4, n_encoder_layers=args.layers,
                          n_decoder_layers=args.layers, d_ff=args.d_ff or 4 * args.d_model, dropout=args.dropout,
                          fused_attention=fused)
        model = Transformer(cfg)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        tokens = seconds = 0.0
        step_ms = []

        def train_step(batch) -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = model(batch.src, batch.tgt_in)
            loss = F.cross_entropy(logits.float().flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0,
                                   label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()

        cpu_before = os.times()
        for i, batch in enumerate(batches):
            t0 = time.perf_counter()
            train_step(batch)
            if i >= args.warmup:
                seconds += time.perf_counter() - t0
                tokens += int((batch.tgt_out != 0).sum())
                step_ms.append(1000 * (time.perf_counter() - t0))
        step_ms.sort()
        cpu = os.times()
        print(f"{name:<14} {tokens / seconds:8.0f} target tok/s   median step {step_ms[len(step_ms) // 2]:6.0f} ms   "
              f"system CPU {cpu.system - cpu_before.system:5.1f} s, user {cpu.user - cpu_before.user:5.1f} s", flush=True)
        if peak:
            flops = sum(step_flops(model, b) for b in batches[args.warmup:])
            print(f"{'':<14} {flops / seconds / 1e9:8.1f} GFLOP/s of matrix work: {flops / seconds / 1e9 / peak:.0%} "
                  "of the fp32 peak", flush=True)
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for batch in batches[args.warmup: args.warmup + 5]:
                    train_step(batch)
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8, max_name_column_width=50))


def matmul_peak(n: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of the fastest of ``repeats`` fp32 (n x n) products."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = min(_timed(lambda: torch.mm(a, b)) for _ in range(repeats))
    return 2 * n ** 3 / best / 1e9


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def step_flops(model, batch) -> float:
    """Matrix FLOPs of one training step (forward + backward = 3 x forward's 2 per weight and
    token), on the padded batch as the kernels see it; attention's QK^T and AV products too."""
    d = model.config.d_model
    encoder = sum(p.numel() for n, p in model.encoder.named_parameters() if p.dim() > 1)
    decoder = sum(p.numel() for n, p in model.decoder.named_parameters() if p.dim() > 1)
    output = model.config.vocab_size * d
    src, tgt = batch.src.numel(), batch.tgt_in.numel()
    s_len, t_len = batch.src.size(1), batch.tgt_in.size(1)
    attention = 2 * 2 * d * (model.config.n_encoder_layers * src * s_len
                             + model.config.n_decoder_layers * tgt * (t_len + s_len))
    return 3 * (2 * (encoder * src + (decoder + output) * tgt) + attention)


if __name__ == "__main__":
    main()
