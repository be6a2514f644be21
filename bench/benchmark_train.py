"""Training-step throughput (target tokens/s) on real Multi30k batches, side by side:
fp32 vs bf16 autocast, explicit vs fused attention, PyTorch's cross-entropy over every padded
position vs minitrans's training loss ("rows": padding dropped before the output projection,
which runs in blocks inside the loss, minitrans.training.loss), with the time the data loader takes.

    MINITRANS_DATA=../shared/data python bench/benchmark_train.py [--steps 20] [--d-model 256 --layers 3]
    MINITRANS_DATA=../shared/data python bench/benchmark_train.py --settings "bf16 explicit" --allocator default
    MINITRANS_DATA=../shared/data python bench/benchmark_train.py --settings "bf16 explicit" --allocator tuned
    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
      MINITRANS_DATA=../shared/data python bench/benchmark_train.py --settings "fp32 explicit" --peak --profile
    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
      MINITRANS_DATA=../shared/data python bench/benchmark_train.py --settings "fp32 explicit,fp32 rows" \
      --interleave --peak --d-model 128 --d-ff 512 --dropout 0 --steps 40

``--peak`` also times a large fp32 matrix product (the machine's fp32 peak as PyTorch reaches it)
and says what share of it each setting's step reaches: matrix FLOPs of a step counted as
6 x (encoder weights x padded source tokens + (decoder weights + output projection) x padded
target tokens), attention's products included; for the "rows" settings the output projection
counts the target's non-padding tokens only, as it sees no others.

The allocator setting (see minitrans.cli.runtime) is process-wide, so compare it across two runs,
alternated; the script prints the process's system CPU time (page faults) beside the rate.

Each setting trains a fresh model on the same batches in one process; the first steps are
warm-up and not counted. Compare ratios: these machines are noisy, so ``--interleave`` runs each
batch through every setting in turn (the order rotating) and prints the ratio of rates over the
same batches and the median per-batch ratio.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.nn.functional as F

from minitrans import ModelConfig, Transformer
from minitrans.data.datamodule import TranslationDataModule
from minitrans.training.loss import BLOCK_ROWS, teacher_forced_loss
from minitrans.precision import fused_adamw

SETTINGS = {  # name: (bf16 autocast, fused attention, minitrans's training loss and optimizer)
    "fp32 explicit": (False, False, False),
    "bf16 explicit": (True, False, False),
    "bf16 fused": (True, True, False),
    "fp32 rows": (False, False, True),
    "bf16 rows": (True, False, True),
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
    parser.add_argument("--settings", default=",".join(SETTINGS),
                        help="comma-separated subset of: " + ", ".join(SETTINGS) + " ('fp32 rows@256': blocks of 256)")
    parser.add_argument("--allocator", choices=["default", "tuned"], default="default",
                        help="glibc malloc as it is, or as MINITRANS_MALLOC=tuned sets it (minitrans.cli.runtime)")
    parser.add_argument("--peak", action="store_true", help="report each step's share of fp32 matrix peak")
    parser.add_argument("--interleave", action="store_true",
                        help="run every batch through each setting in turn (the fair comparison on noisy cores)")
    parser.add_argument("--optimizer", action="store_true",
                        help="also time one AdamW step of the model alone, foreach against fused (median of 20)")
    parser.add_argument("--profile", action="store_true",
                        help="also print torch.profiler's top operators for each setting")
    args = parser.parse_args()
    if args.allocator == "tuned":
        from minitrans.cli.runtime import tune_allocator

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
    names = [name.strip() for name in args.settings.split(",")]
    if args.optimizer:
        optimizer_steps(args)
    runs = [Setting(name, args) for name in names]
    if args.interleave:  # every batch through every setting in turn, the order rotating
        for i, batch in enumerate(batches):
            for k in range(len(runs)):
                runs[(i + k) % len(runs)].step(batch, counted=i >= args.warmup)
    else:
        for run in runs:
            for i, batch in enumerate(batches):
                run.step(batch, counted=i >= args.warmup)
    for run in runs:
        run.report(peak, batches[args.warmup:])
    if args.interleave and len(runs) > 1:
        for run in runs[1:]:
            ratios = sorted(a / b for a, b in zip(runs[0].step_s, run.step_s))
            print(f"{run.name} against {runs[0].name}: {sum(runs[0].step_s) / sum(run.step_s):.3f}x the rate over "
                  f"the same {len(ratios)} batches, median per-batch ratio {ratios[len(ratios) // 2]:.3f}")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        for run in runs:
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for batch in batches[args.warmup: args.warmup + 5]:
                    run.step(batch, counted=False)
            print(run.name)
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=50))


def optimizer_steps(args) -> None:
    """Milliseconds of one AdamW step over the model's parameters (random gradients), foreach
    against fused, alternated."""
    model = Transformer(ModelConfig(vocab_size=args.vocab_size, d_model=args.d_model, n_heads=4,
                                    n_encoder_layers=args.layers, n_decoder_layers=args.layers,
                                    d_ff=args.d_ff or 4 * args.d_model, dropout=0.0))
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    optimizers = {kind: torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9,
                                          **{kind: True}) for kind in ("foreach", "fused")}
    times: dict[str, list[float]] = {kind: [] for kind in optimizers}
    for i in range(23):
        for kind, opt in optimizers.items():
            t0 = time.perf_counter()
            opt.step()
            if i >= 3:
                times[kind].append(1000 * (time.perf_counter() - t0))
    print("AdamW step: " + ", ".join(f"{kind} {sorted(t)[len(t) // 2]:.2f} ms" for kind, t in times.items()))


class Setting:
    """One setting's fresh model (seed 0), optimizer and timings."""

    def __init__(self, name: str, args) -> None:
        self.name = name
        base, _, block = name.partition("@")  # "fp32 rows@256": the loss's block of positions
        self.block = int(block) if block else BLOCK_ROWS
        self.bf16, fused, self.rows = SETTINGS[base]
        torch.manual_seed(0)
        cfg = ModelConfig(vocab_size=args.vocab_size, d_model=args.d_model, n_heads=4, n_encoder_layers=args.layers,
                          n_decoder_layers=args.layers, d_ff=args.d_ff or 4 * args.d_model, dropout=args.dropout,
                          fused_attention=fused)
        self.model = Transformer(cfg)
        # as minitrans trains (the recipes clip gradients) for the "rows" settings; PyTorch's default
        # (foreach) otherwise
        fused_opt = fused_adamw("cpu", scaled=False, clips_gradients=True) if self.rows else None
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=fused_opt)
        self.tokens = 0
        self.step_s: list[float] = []
        self.cpu = [0.0, 0.0]  # system, user seconds

    def step(self, batch, counted: bool) -> None:
        t0, cpu0 = time.perf_counter(), os.times()
        model = self.model
        if self.rows:  # as minitrans trains: padding dropped, the projection inside the blocked loss
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
                summed, _, n = teacher_forced_loss(model, batch.src, batch.tgt_in, batch.tgt_out, 0.1,
                                                   block=self.block)
            loss = summed / n
        else:  # every padded position projected, PyTorch's cross-entropy
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
                logits = model(batch.src, batch.tgt_in)
            loss = F.cross_entropy(logits.float().flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0,
                                   label_smoothing=0.1)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        if counted:
            cpu = os.times()
            self.step_s.append(time.perf_counter() - t0)
            self.tokens += int((batch.tgt_out != 0).sum())
            self.cpu[0] += cpu.system - cpu0.system
            self.cpu[1] += cpu.user - cpu0.user

    def report(self, peak: float | None, batches) -> None:
        seconds = sum(self.step_s)
        median = sorted(self.step_s)[len(self.step_s) // 2]
        print(f"{self.name:<14} {self.tokens / seconds:8.0f} target tok/s   median step {1000 * median:6.0f} ms   "
              f"system CPU {self.cpu[0]:5.1f} s, user {self.cpu[1]:5.1f} s", flush=True)
        if peak:
            flops = sum(step_flops(self.model, b, self.rows) for b in batches)
            print(f"{'':<14} {flops / seconds / 1e9:8.1f} GFLOP/s of matrix work: {flops / seconds / 1e9 / peak:.0%} "
                  "of the fp32 peak", flush=True)


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


def step_flops(model, batch, rows: bool = False) -> float:
    """Matrix FLOPs of one training step (forward + backward = 3 x forward's 2 per weight and
    token), on the padded batch as the kernels see it; attention's QK^T and AV products too.
    ``rows``: the output projection sees the target's non-padding positions only."""
    d = model.config.d_model
    encoder = sum(p.numel() for n, p in model.encoder.named_parameters() if p.dim() > 1)
    decoder = sum(p.numel() for n, p in model.decoder.named_parameters() if p.dim() > 1)
    output = model.config.vocab_size * d
    src, tgt = batch.src.numel(), batch.tgt_in.numel()
    projected = int((batch.tgt_out != 0).sum()) if rows else tgt
    s_len, t_len = batch.src.size(1), batch.tgt_in.size(1)
    attention = 2 * 2 * d * (model.config.n_encoder_layers * src * s_len
                             + model.config.n_decoder_layers * tgt * (t_len + s_len))
    return 3 * (2 * (encoder * src + decoder * tgt + output * projected) + attention)


if __name__ == "__main__":
    main()
