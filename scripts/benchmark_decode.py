"""Decoding speed: sentences/s and target tokens/s for greedy and beam search, with and
without the key/value cache, on the 1,000 Multi30k test_2016_flickr sentences.

    python scripts/benchmark_decode.py --checkpoint runs/tiny/checkpoints/best.ckpt [--limit 1000]

Runs the settings side by side in one process (these machines are noisy: compare ratios).
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

from minitrans import Translator
from minitrans.evaluate import load_eval_data, score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--bf16", action="store_true", help="decode under bf16 autocast")
    parser.add_argument("--settings", default="greedy+cache,greedy-cache,beam5+cache,beam5-cache")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    translator = Translator.from_checkpoint(args.checkpoint, bf16=args.bf16)
    sources, refs = load_eval_data("multi30k", args.split, None, None)
    sources, refs = sources[: args.limit], refs[: args.limit]
    print(f"{len(sources)} sentences, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{'bf16 autocast' if args.bf16 else 'fp32'}")
    print(f"{'setting':<14} {'sent/s':>8} {'tok/s':>8} {'seconds':>8} {'BLEU':>6}")
    for setting in args.settings.split(","):
        beam = 1 if setting.startswith("greedy") else int(setting[4:].split("+")[0].split("-")[0])
        cache = "+cache" in setting
        started = time.perf_counter()
        results = translator.translate_detailed(sources, beam_size=beam, use_cache=cache)
        seconds = time.perf_counter() - started
        hyps = [r.text for r in results]
        n_tokens = sum(len(translator.tokenizer.encode([h])[0]) + 1 for h in hyps)
        print(f"{setting:<14} {len(sources) / seconds:>8.1f} {n_tokens / seconds:>8.0f} {seconds:>8.1f} "
              f"{score(hyps, refs)['bleu']:>6.2f}", flush=True)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
