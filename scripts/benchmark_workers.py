"""Prototype measurement: beam search over two worker threads with one intra-op thread each,
against the engine's one loop with two intra-op threads (issue #13).

    python scripts/benchmark_workers.py --checkpoint runs/multi30k-small/avg-top3.ckpt [--rounds 3]

Why: on these 2 cores CTranslate2 fp32 decodes about as fast with one thread as with two
(README, Speed), while minitrans's small per-step operators scale poorly across two threads
(``scripts/pyspy_leaves.py``: a quarter of the main thread's beam-search samples are in OpenMP's
runtime). Two workers decode different batches at once; PyTorch releases the GIL inside
operators. Same batches, each decoded by the engine itself (``NativeEngine.search``); same
outputs (checked). Not wired into the engine: this script measures whether it is worth doing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from minitrans import Translator
from minitrans.engines import token_batches
from minitrans.evaluate import load_eval_data
from minitrans.search import DEFAULT_ALPHA
from minitrans.tokenizer import EOS_ID


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=6000)
    args = parser.parse_args()
    translator = Translator.from_checkpoint(args.checkpoint)
    engine = translator.engine
    texts, _ = load_eval_data("multi30k", "test_2016_flickr", None, None)
    sources = [ids + [EOS_ID] for ids in translator.tokenizer.encode(texts)]
    settings = (args.beam, DEFAULT_ALPHA, 1, translator.max_len_a, translator.max_len_b)
    engine.max_tokens = args.max_tokens
    plan = token_batches(sources, args.max_tokens, args.beam)  # the engine's own batches

    def decode(chunk: list[int]) -> list[list[int]]:
        """One planned batch through the engine (it fits the budget, so the engine keeps it whole)."""
        return [hyps[0].tokens for hyps in engine.search([sources[i] for i in chunk], *settings)]

    def one_loop() -> list[list[int]]:  # the engine as it runs today
        torch.set_num_threads(2)
        return [hyps[0].tokens for hyps in engine.search(sources, *settings)]

    def two_workers() -> list[list[int]]:
        torch.set_num_threads(1)
        tokens: list[list[int]] = [[] for _ in sources]
        with ThreadPoolExecutor(2) as pool:
            for chunk, outputs in zip(plan, pool.map(decode, plan)):
                for i, out in zip(chunk, outputs):
                    tokens[i] = out
        return tokens

    decode(plan[0])  # warm-up
    times: dict[str, list[float]] = {"one loop, 2 threads": [], "two workers, 1 thread each": []}
    outputs = {}
    for _ in range(args.rounds):
        for name, run in zip(times, (one_loop, two_workers)):
            started = time.perf_counter()
            outputs[name] = run()
            times[name].append(time.perf_counter() - started)
    assert outputs["one loop, 2 threads"] == outputs["two workers, 1 thread each"], "outputs differ"
    print(f"{len(sources)} sentences, beam {args.beam}, {len(plan)} batches, median of {args.rounds} rounds")
    for name, seconds in times.items():
        print(f"{name:28s} {len(sources) / statistics.median(seconds):7.1f} sent/s "
              f"(rounds: {', '.join(f'{len(sources) / s:.1f}' for s in seconds)})")


if __name__ == "__main__":
    main()
