"""Decoding speed, side by side: minitrans's engine against CTranslate2, same weights.

    python bench/benchmark_decode.py --checkpoint runs/quickstart/checkpoints/best.ckpt \\
        [--systems native-fp32,native-bf16,native-int8,ct2-float32,ct2-int8] [--modes greedy,beam5] \\
        [--rounds 3] [--limit 1000] [--threads 2]

One model, the Multi30k test_2016_flickr sentences (text in, text out), greedy and beam 5.
The checkpoint is exported once per CTranslate2 weight type (``minitrans export``). Every
(system, mode) runs in a fresh child process, one at a time, so that its peak resident
memory is its own; rounds alternate the systems (these machines are noisy: the table reports
the median round). Columns: sentences/s, output tokens/s, BLEU, the share of outputs
identical to native fp32's, peak RSS.

Systems: ``default`` (what a user gets with no flag: ``--engine auto --precision auto``, the
checkpoint's cached CTranslate2 conversion where CTranslate2 is installed, issue #45; the
conversion is made before the timed runs, as a user's second run finds it), ``auto-fp32`` and
``auto-int8`` (``--engine auto`` with that ``--precision``), ``native-auto`` (the native engine
with ``--precision auto``), ``native-fp32``,
``native-bf16`` (``--precision bf16``: weights
cast once and prepacked), either ending in ``-shortlist`` (``--shortlist``: the checkpoint's
vocabulary shortlist from ``minitrans shortlist``; the others score the full vocabulary) or in
``-unpacked`` (no weight prepacked, :mod:`minitrans.decoding.prepack`), ``native-int8`` (dynamic int8 Linear
layers, torchao), ``native-int8-legacy`` (the same with ``torch.ao.quantization.quantize_dynamic``),
``native-fp32-nocache`` (the prefix recomputed every step),
``ct2-<type>`` for any ``minitrans export --quantization`` type, and ``baseline-<x>``:
``native-<x>`` of another minitrans checkout (``--baseline DIR``, e.g. a ``git worktree`` of
an older commit; ``baseline-fp32``, ``baseline-auto``), to measure a change of the engine itself in the same run
(``--baseline NAME=DIR``, repeated, names several: systems ``NAME-<x>``, e.g. a ladder of commits). A system may
end in ``@N`` to give it its own batch budget instead of ``--max-tokens`` (``native-fp32@30000``):
the two engines count their budgets differently (see ``--max-tokens``). A system name may end
in ``-wN`` for N decoding workers (``native-fp32-w1``, ``ct2-float32-w2``; default: the engines'
default, two on 2 threads), to compare one batch at a time with ``--threads`` intra-op threads
against N batches at once. Every system runs with the allocator setting as ``minitrans
translate`` applies it (:mod:`minitrans.cli.runtime`: on, unless ``MINITRANS_MALLOC=default``); a
system ending in ``+untuned`` runs with ``MINITRANS_MALLOC=default``, one ending in ``+tuned``
with ``MINITRANS_MALLOC=tuned`` (a ``--baseline`` checkout from before decoding used it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def source_language(checkpoint: str) -> str:
    """The checkpoint's source language: the test set is read in its direction."""
    from minitrans.text import languages
    from minitrans.engines.registry import load_metadata

    return languages.of(load_metadata(checkpoint))[0]


def allocator_as_translate() -> None:
    """The allocator setting as ``minitrans translate`` applies it (:mod:`minitrans.cli.runtime`);
    without it, page faults land in the vocabulary-sized operators."""
    try:
        from minitrans.cli.runtime import tune_allocator
    except ImportError:  # a --baseline checkout may predate it
        return
    try:
        tune_allocator(decoding=True)
    except TypeError:  # a --baseline checkout from before it was on for decoding
        tune_allocator()


def child(args: argparse.Namespace) -> None:
    """Translate the sentences once with one system and mode; print one JSON line."""
    allocator_as_translate()
    import torch

    from minitrans import Translator
    from minitrans.data.heldout import load_eval_data

    torch.set_num_threads(args.threads)
    sources, _ = load_eval_data("multi30k", args.split, None, None, source_lang=source_language(args.checkpoint))
    sources = sources[: args.limit]
    system, beam = args.child, 1 if args.mode == "greedy" else int(args.mode[4:])
    workers = {"workers": args.workers} if args.workers else {}  # a --baseline checkout may predate workers
    if system.startswith("ct2-"):
        translator = Translator.from_export(Path(args.workdir) / system, threads=args.threads,
                                            max_tokens=args.max_tokens, **workers)
    elif system == "default" or system.startswith("auto-"):  # --engine auto (the cache: see main)
        precision = {} if system == "default" else {"precision": system[5:]}
        translator = Translator.load(args.checkpoint, max_tokens=args.max_tokens, **precision, **workers)
    else:
        options = {} if not hasattr(Translator, "precision") else {  # a --baseline checkout may predate them
            "precision": "auto" if system == "native-auto" else "bf16" if system.startswith("native-bf16") else "fp32",
            "shortlist": system.endswith("-shortlist")}
        if "-unpacked" in system:  # the weights as they are: no matrix laid out for oneDNN
            from minitrans.checkpoint import load_for_inference
            from minitrans.engines.native_engine import NativeEngine

            model, tokenizer, meta = load_for_inference(args.checkpoint)
            engine = NativeEngine(model, args.max_tokens, options["precision"], prepack=False, **workers)
            limits = {k: v for k, v in meta.get("decoding", {}).items() if k in ("max_len_a", "max_len_b")}
            translator = Translator(engine, tokenizer, **limits)
            translator.meta = meta
        else:
            translator = Translator.from_checkpoint(args.checkpoint, max_tokens=args.max_tokens, **options, **workers)
        if system.endswith("-shortlist") and translator.engine.shortlist is None:
            raise SystemExit(f"{system}: {args.checkpoint} has no shortlist (write one with `minitrans shortlist`)")
        if system.startswith("native-int8"):
            quantize_int8(translator.model, legacy=system.endswith("legacy"))
    started = time.perf_counter()
    if args.one_at_a_time:  # a server's lone requests: latency, not throughput
        results = [r for s in sources for r in translator.translate_detailed([s], beam_size=beam)]
    else:
        results = translator.translate_detailed(sources, beam_size=beam, use_cache=not system.endswith("nocache"))
    seconds = time.perf_counter() - started
    hyps = [r.text for r in results]
    tokens = sum(len(seq) + 1 for seq in translator.tokenizer.encode(hyps))  # + eos
    print(json.dumps({"seconds": seconds, "sentences": len(hyps), "tokens": tokens, "hyps": hyps,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def profile(args: argparse.Namespace) -> None:
    """Where native decoding spends its time: operators by self CPU time, and the share of
    the search's own Python (everything outside the operators), with the allocator setting as
    ``minitrans translate`` applies it."""
    allocator_as_translate()
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    from minitrans import Translator
    from minitrans.data.heldout import load_eval_data

    torch.set_num_threads(args.threads)
    sources = load_eval_data("multi30k", args.split, None, None,
                             source_lang=source_language(args.checkpoint))[0][: args.limit]
    mode = args.modes.split(",")[0]
    beam = 1 if mode == "greedy" else int(mode[4:])
    # One worker: the profiler records the calling thread's operators, not a worker thread's.
    translator = Translator.from_checkpoint(args.checkpoint, max_tokens=args.max_tokens, workers=1)
    translator.translate(sources[:50], beam_size=beam)  # warm-up
    started = time.perf_counter()
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        translator.translate(sources, beam_size=beam)
    wall = time.perf_counter() - started
    events = prof.key_averages()
    in_ops = sum(e.self_cpu_time_total for e in events) / 1e6
    print(f"{len(sources)} sentences, {mode}, {wall:.2f} s under the profiler; operators {in_ops:.2f} s of "
          f"self CPU time ({args.threads} threads)")
    print(events.table(sort_by="self_cpu_time_total", row_limit=20))


def quantize_int8(model, legacy: bool = False) -> None:
    """``native-int8-legacy``: minitrans's own ``--int8`` (:func:`minitrans.engines.native_engine.quantize_int8`,
    ``torch.ao.quantization.quantize_dynamic``); ``native-int8``: torchao's dynamic int8 config
    (PyTorch's recommended quantisation library), Linear layers only."""
    if legacy:
        from minitrans.engines.native_engine import quantize_int8 as native_int8

        native_int8(model)
        return
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    quantize_(model, Int8DynamicActivationInt8WeightConfig())


def parse_system(system: str) -> tuple[str, int, str]:
    """``name[-wN][@budget][+tuned|+untuned]`` -> (name, workers or 0 for the default, budget or "")."""
    spec, _, budget = system.partition("+")[0].partition("@")
    name, workers = re.fullmatch(r"(.+?)(?:-w(\d+))?", spec).groups()
    return name, int(workers or 0), budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--systems", default="native-fp32,native-bf16,native-int8,ct2-float32,ct2-int8")
    parser.add_argument("--modes", default="greedy,beam5")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median is reported")
    parser.add_argument("--max-tokens", type=int, default=6000,
                        help="batch budget of both engines (native: sentences x longest source x beam; "
                             "CTranslate2: source tokens)")
    parser.add_argument("--profile", action="store_true",
                        help="instead of the table: profile the default native path (one worker) on the first "
                             "--limit sentences of the first mode (torch.profiler, operators by self CPU time)")
    parser.add_argument("--one-at-a-time", action="store_true",
                        help="translate each sentence by its own call (a lone request's latency is 1 / sent/s)")
    parser.add_argument("--baseline", action="append", default=[],
                        help="a minitrans checkout whose engine runs as systems baseline-<x> (baseline-fp32, "
                             "baseline-auto); NAME=DIR runs it as NAME-<x>; may be repeated")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.profile:
        return profile(args)

    from minitrans.data.heldout import load_eval_data
    from minitrans.metrics import score
    from minitrans.engines.ctranslate2_export import export_ctranslate2

    systems, modes = args.systems.split(","), args.modes.split(",")
    checkouts = dict(entry.split("=", 1) if "=" in entry else ("baseline", entry) for entry in args.baseline)
    _, refs = load_eval_data("multi30k", args.split, None, None, source_lang=source_language(args.checkpoint))
    refs = refs[: args.limit]
    with tempfile.TemporaryDirectory(prefix="minitrans-bench-") as workdir:
        for name in sorted({parse_system(system)[0] for system in systems}):
            if name.startswith("ct2-"):
                export_ctranslate2(args.checkpoint, Path(workdir) / name, name[4:])
            if name == "default" or name.startswith("auto-"):  # the user's cache, converted now if need be
                from minitrans.engines.ctranslate2_cache import converted

                converted(args.checkpoint)
        runs: dict[tuple[str, str], list[dict]] = {}
        for round_ in range(args.rounds):
            for mode in modes:
                for system in systems:
                    name, workers, budget = parse_system(system)
                    command = [sys.executable, __file__, "--checkpoint", args.checkpoint, "--child", name,
                               "--workers", str(workers),
                               "--mode", mode, "--workdir", workdir, "--split", args.split,
                               "--limit", str(args.limit), "--threads", str(args.threads),
                               "--max-tokens", budget or str(args.max_tokens)] + ["--one-at-a-time"] * args.one_at_a_time
                    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
                    if system.endswith(("+tuned", "+untuned")):
                        env["MINITRANS_MALLOC"] = "tuned" if system.endswith("+tuned") else "default"
                    prefix, _, rest = name.partition("-")
                    if prefix in checkouts:
                        env["PYTHONPATH"] = checkouts[prefix]  # its `minitrans` package comes first
                        command[command.index(name)] = "native-" + rest  # baseline-auto -> native-auto
                    done = subprocess.run(command, capture_output=True, text=True, env=env)
                    if done.returncode:  # say why, not only that a child failed
                        raise SystemExit(f"{system} {mode} failed:\n{done.stderr[-1500:]}")
                    out = done.stdout
                    result = json.loads(out.strip().splitlines()[-1])
                    runs.setdefault((system, mode), []).append(result)
                    print(f"round {round_ + 1}: {system:<20} {mode:<7} {result['sentences'] / result['seconds']:7.1f} "
                          f"sent/s", file=sys.stderr, flush=True)
    print(f"{len(refs)} sentences of multi30k {args.split}, {args.threads} threads, median of {args.rounds} rounds")
    natives = [system for system in systems if parse_system(system)[0] == "native-fp32"]
    print(f"| system | mode | sent/s | tok/s | BLEU | identical to {natives[0] if natives else 'native-fp32'} "
          "| peak RSS MiB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for mode in modes:
        reference = runs[(natives[0], mode)][0] if natives else None
        for system in systems:
            results = runs[(system, mode)]
            median = statistics.median(r["seconds"] for r in results)
            first = results[0]
            same = (f"{100 * sum(a == b for a, b in zip(first['hyps'], reference['hyps'])) / len(refs):.1f}%"
                    if reference else "-")
            print(f"| {system} | {mode} | {first['sentences'] / median:.1f} | {first['tokens'] / median:.0f} | "
                  f"{score(first['hyps'], refs)['bleu']:.2f} | {same} | {max(r['peak_rss_mib'] for r in results):.0f} |")


if __name__ == "__main__":
    main()
