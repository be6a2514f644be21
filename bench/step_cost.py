"""What one greedy decoding step costs, and where: a few rows against many (issue #29).

    python bench/step_cost.py --checkpoint runs/multi30k-small/checkpoints/best.ckpt [--threads 1,2] [--repeats 5]

Two batches of the 1,000 `test_2016_flickr` sentences, as the engine's token budget cuts them:
the shortest sources (the first batch, ``--many`` sentences) and the longest (the last batch,
``--few`` sentences: its longest output sets how many steps it runs). Each is decoded greedily
by :func:`minitrans.search.greedy_search` (``--precision auto``, warm, the median of
``--repeats``) on 1 and 2 intra-op threads, and the time is split three ways: the decoder
(``Transformer.decode``, every layer of every step), the rest of a step's scoring (the float32
copy and log-softmax over the vocabulary, the masks), and the search around it (the encoder,
the pick, the bookkeeping, dropping finished rows). A step of a few rows is all fixed costs: if
its time does not fall with a second thread, it is the per-call cost of the operators (and
the Python that calls them), not arithmetic. Last, each batch once under ``torch.profiler``: how
many ATen operator calls a step makes.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--few", type=int, default=25, help="sentences of the longest-source batch")
    parser.add_argument("--many", type=int, default=428, help="sentences of the shortest-source batch")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from minitrans.runtime import tune_allocator

    tune_allocator(force=True)  # as `minitrans translate` decodes
    import torch
    from torch.profiler import ProfilerActivity, profile

    from minitrans import Translator, search
    from minitrans.batching import pad
    from minitrans.evaluate import load_eval_data
    from minitrans.transformer import Transformer
    from minitrans.vocab import EOS_ID

    sources, _ = load_eval_data("multi30k", "test_2016_flickr", None, None)
    translator = Translator.from_checkpoint(args.checkpoint)
    pieces = sorted(translator.tokenizer.encode(sources), key=len)
    model = translator.engine.model
    clocks = {"decode": 0.0, "log_probs": 0.0}

    def clocked(name, function):
        def run(*a, **k):
            started = time.perf_counter()
            try:
                return function(*a, **k)
            finally:
                clocks[name] += time.perf_counter() - started
        return run

    Transformer.decode = clocked("decode", Transformer.decode)
    search._Stepper.log_probs = clocked("log_probs", search._Stepper.log_probs)
    print(f"{args.checkpoint}: precision {translator.engine.precision.name}, median of {args.repeats}")
    for name, chosen in ((f"{args.few} longest sources", pieces[-args.few:]),
                         (f"{args.many} shortest sources", pieces[:args.many])):
        batch = pad([p + [EOS_ID] for p in chosen])
        for threads in (int(t) for t in args.threads.split(",")):
            torch.set_num_threads(threads)
            runs = []
            with torch.inference_mode():
                search.greedy_search(model, batch)  # warm-up
                for _ in range(args.repeats):
                    clocks.update(decode=0.0, log_probs=0.0)
                    started = time.perf_counter()
                    out = search.greedy_search(model, batch)
                    runs.append((time.perf_counter() - started, clocks["decode"], clocks["log_probs"]))
            total, decode, scoring = sorted(runs)[len(runs) // 2]
            steps = max(len(h.tokens) for h in out) + 1  # the longest output, eos included
            print(f"{name} (source {batch.size(1)} pieces), {threads} thread(s): {1e3 * total:6.1f} ms, "
                  f"{steps} steps, {1e3 * total / steps:5.2f} ms a step; decoder {decode / total:4.0%}, "
                  f"scoring {(scoring - decode) / total:4.0%}, search and encoder {(total - scoring) / total:4.0%}")
        with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as profiled:
            search.greedy_search(model, batch)
        calls = sum(event.count for event in profiled.key_averages())
        print(f"{name}: {calls:,} ATen operator calls (views included; torch.profiler), {calls / steps:,.0f} a step")


if __name__ == "__main__":
    main()
