"""Decoding in one warm process: settings alternated in place, and where the time goes around the engine.

    python bench/warm_decode.py --checkpoint CKPT [--modes greedy,beam5] [--rounds 5]
    python bench/warm_decode.py --checkpoint CKPT --vary minitrans.attention.SHORT_ROWS=0,16
    python bench/warm_decode.py --checkpoint CKPT --allocator tuned   # run alternately with and without

`bench/benchmark_decode.py` decodes once per fresh process, as `minitrans translate` does; this
script loads the model once (``--precision auto``) and translates the 1,000 `test_2016_flickr`
sentences ``--rounds`` times per mode after a warm-up, as a long-running server would (the
warm-up is the mode's first pass over the sentences, then a second pass; printed: the first
pass's rate, the two passes' page faults, and how much slower each packed product's first call
at a shape was than that shape's median call in the second pass: the first pass pays for
first-touched memory and for the oneDNN primitive of every new shape). With
``--vary MODULE.ATTRIBUTE=V1,V2,...`` it sets the attribute to each value in turn within every
round, so a switch of the engine is compared on the same warm process, its rounds alternated
(these machines drift). Each line gives the median sentences/s (range), and the median seconds
the Translator spends outside ``engine.search`` (sentence splitting, SentencePiece, results).
Last, SentencePiece's batch call for one sentence at a time (what the Translator's
``Tokenizer.decode`` did before it decoded sequence by sequence) against the per-sequence call,
over the last round's outputs. ``--allocator tuned`` applies ``minitrans.runtime.tune_allocator``
first (process-wide, so compare it across processes).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib
import resource
import statistics
import time


@contextlib.contextmanager
def product_clock():
    """Times every call of :class:`minitrans.prepack.PackedLinear` (bf16 decoding's products) while
    open: {(in, out, rows): [seconds, ...]}. oneDNN builds a primitive at a shape's first call."""
    from minitrans.prepack import PackedLinear

    calls, forward = collections.defaultdict(list), PackedLinear.forward

    def clocked(self, x):
        started = time.perf_counter()
        y = forward(self, x)
        calls[(self.in_features, self.out_features, x.numel() // x.size(-1))].append(time.perf_counter() - started)
        return y

    PackedLinear.forward = clocked
    try:
        yield calls
    finally:
        PackedLinear.forward = forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--modes", default="greedy,beam5")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vary", help="MODULE.ATTRIBUTE=V1,V2,... (Python literals), alternated within each round")
    parser.add_argument("--allocator", choices=("default", "tuned"), default="default")
    args = parser.parse_args()
    if args.allocator == "tuned":
        from minitrans.runtime import tune_allocator

        if not tune_allocator(force=True):
            raise SystemExit("--allocator tuned: this C library has no glibc mallopt")
    import ast

    import torch

    from minitrans import Translator
    from minitrans.evaluate import load_eval_data

    torch.set_num_threads(args.threads)
    sources, _ = load_eval_data("multi30k", "test_2016_flickr", None, None)
    translator = Translator.from_checkpoint(args.checkpoint)
    module, attribute, values = None, None, [None]
    if args.vary:
        target, _, listed = args.vary.partition("=")
        module_name, _, attribute = target.rpartition(".")
        module = importlib.import_module(module_name)
        values = [ast.literal_eval(v) for v in listed.split(",")]
    engine, searching = translator.engine, [0.0]
    search = engine.search

    def timed_search(*a, **k):
        started = time.perf_counter()
        try:
            return search(*a, **k)
        finally:
            searching[0] += time.perf_counter() - started

    engine.search = timed_search
    print(f"{len(sources)} sentences, {args.threads} threads, allocator {args.allocator}, "
          f"precision {engine.precision.name}, median of {args.rounds} rounds")
    for mode in args.modes.split(","):
        beam = 1 if mode == "greedy" else int(mode[4:])
        faults, started = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
        with product_clock() as first:
            translator.translate(sources, beam_size=beam)  # the warm-up: this mode's first pass, as a CLI run decodes
        rate = len(sources) / (time.perf_counter() - started)
        with product_clock() as second:
            translator.translate(sources, beam_size=beam)
        extra = sum(calls[0] - statistics.median(second[shape]) for shape, calls in first.items() if shape in second)
        print(f"{mode:<7} first pass (as a fresh process decodes) {rate:8.1f} sent/s; "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults:,} minor page faults (both passes); "
              f"{len(first)} (weight, rows) shapes of packed products, their first calls {1e3 * extra:.0f} ms "
              f"slower than the same shape's median call in the second pass")
        rates = {repr(v): [] for v in values}
        outside = {repr(v): [] for v in values}
        for _ in range(args.rounds):
            for value in values:
                if module is not None:
                    setattr(module, attribute, value)
                searching[0] = 0.0
                started = time.perf_counter()
                outputs = translator.translate(sources, beam_size=beam)
                seconds = time.perf_counter() - started
                rates[repr(value)].append(len(sources) / seconds)
                outside[repr(value)].append(seconds - searching[0])
        for key in rates:
            label = f"{attribute}={key}" if module is not None else "as is"
            print(f"{mode:<7} {label:<24} {statistics.median(rates[key]):8.1f} sent/s "
                  f"({min(rates[key]):.1f}-{max(rates[key]):.1f}); outside the engine "
                  f"{statistics.median(outside[key]):.3f} s")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"peak RSS {usage.ru_maxrss / 1024:.0f} MiB, system CPU {usage.ru_stime:.1f} s")
    ids = translator.tokenizer.encode(outputs)
    sp = translator.tokenizer.sp
    for label, decode in (("batch call per sentence", lambda seq: sp.decode([seq], num_threads=1)),
                          ("per-sequence call", sp.decode_ids)):
        started = time.perf_counter()
        for seq in ids:
            decode(seq)
        print(f"SentencePiece {label}: {1e6 * (time.perf_counter() - started) / len(ids):.1f} µs a sentence")


if __name__ == "__main__":
    main()
