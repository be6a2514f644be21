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

With ``--ctranslate2``, the same batches are then decoded greedily by the engine (1 and 2
threads, without the clocks) and by CTranslate2 (the checkpoint exported in float32 to a
temporary folder; one worker of one thread, its better layout being two such workers; the whole
batch in one ``translate_batch`` call), alternated ``--repeats`` times, warm: milliseconds a
step for the same rows, per thread and with the engine's second thread. A few rows show the
per-call costs; many rows the arithmetic and what a second thread adds.
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
    parser.add_argument("--ctranslate2", action="store_true", help="time CTranslate2 fp32 on the same batches")
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

    plain_decode, plain_log_probs = Transformer.decode, search._Stepper.log_probs
    Transformer.decode = clocked("decode", Transformer.decode)
    search._Stepper.log_probs = clocked("log_probs", search._Stepper.log_probs)
    print(f"{args.checkpoint}: precision {translator.engine.precision.name}, median of {args.repeats}")
    batches = [(name, chosen, pad([p + [EOS_ID] for p in chosen]))  # (name, piece ids, padded with eos)
               for name, chosen in ((f"{args.few} longest sources", pieces[-args.few:]),
                                    (f"{args.many} shortest sources", pieces[:args.many]))]
    for name, chosen, batch in batches:
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
    if args.ctranslate2:
        Transformer.decode, search._Stepper.log_probs = plain_decode, plain_log_probs  # no clocks
        ctranslate2_steps(args, batches, model, translator.tokenizer)


def ctranslate2_steps(args, batches, model, tokenizer) -> None:
    """The engine's greedy steps against CTranslate2 fp32's on the same ``batches`` (name, piece
    ids without eos, the padded eos-terminated batch): the engine on 1 and 2 threads, CTranslate2 as one worker of one thread
    (its better layout is two such workers), alternated ``--repeats`` times after a warm-up,
    medians. CTranslate2 decodes each batch in one ``translate_batch`` call, under the length limit
    of the batch's longest source (the engine's limit per sentence; greedy rows stop at eos)."""
    import tempfile

    import ctranslate2
    import torch

    from minitrans import search
    from minitrans.ctranslate2_engine import _adds_source_eos
    from minitrans.ctranslate2_export import export_ctranslate2
    from minitrans.vocab import BOS_ID, EOS_ID, PAD_ID

    pieces = tokenizer.pieces(range(tokenizer.vocab_size))
    limit = model.config.max_len - 1
    with tempfile.TemporaryDirectory(prefix="minitrans-steps-") as workdir:
        folder = export_ctranslate2(args.checkpoint, f"{workdir}/ct2", "float32")
        translator = ctranslate2.Translator(str(folder), device="cpu", compute_type="float32",
                                            inter_threads=1, intra_threads=1)
        eos = [] if _adds_source_eos(folder) else [pieces[EOS_ID]]
        print("side by side (greedy, warm, alternated), ms a step:")
        for name, chosen, batch in batches:
            words = [[pieces[t] for t in p] + eos for p in chosen]
            longest = torch.tensor([batch.size(1)])
            max_length = int(search.length_limits(longest, search.DEFAULT_MAX_LEN_A, search.DEFAULT_MAX_LEN_B,
                                                  limit)) - 1

            def engine(threads: int) -> list:
                torch.set_num_threads(threads)
                with torch.inference_mode():
                    return [len(h.tokens) + 1 for h in search.greedy_search(model, batch)]

            def ctranslate() -> list:
                out = translator.translate_batch(
                    words, beam_size=1, max_decoding_length=max_length, min_decoding_length=0,
                    return_end_token=True, suppress_sequences=[[pieces[PAD_ID]], [pieces[BOS_ID]]],
                    max_input_length=0, max_batch_size=0)
                return [len(r.hypotheses[0]) for r in out]  # end token included

            systems = {"engine, 1 thread": lambda: engine(1), "engine, 2 threads": lambda: engine(2),
                       "CTranslate2 fp32, 1 thread": ctranslate}
            times: dict[str, list[float]] = {key: [] for key in systems}
            steps = {key: max(run()) for key, run in systems.items()}  # warm-up; the longest output sets the steps
            for _ in range(args.repeats):
                for key, run in systems.items():
                    started = time.perf_counter()
                    run()
                    times[key].append(time.perf_counter() - started)
            line = []
            for key in systems:
                median = sorted(times[key])[len(times[key]) // 2]
                line.append(f"{key} {1e3 * median / steps[key]:.2f} ({steps[key]} steps)")
            print(f"  {name}: " + "; ".join(line))


if __name__ == "__main__":
    main()
