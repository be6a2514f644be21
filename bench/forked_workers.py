"""What forked decoding processes would change, measured piece by piece (issue #29; the variant
is ``bench/variants/process-workers.patch``, not kept: docs/experiments.md).

    MINITRANS_DATA=../shared/data python bench/forked_workers.py --checkpoint runs/multi30k-small/checkpoints/best.ckpt
    # the parts that need the variant's pool: run it against a worktree with the patch applied
    git worktree add /tmp/procs 3eb8513 && git -C /tmp/procs apply $PWD/bench/variants/process-workers.patch
    MINITRANS_DATA=../shared/data PYTHONPATH=/tmp/procs python bench/forked_workers.py --checkpoint CKPT

Four parts, 2 threads, the 1,000 ``test_2016_flickr`` sentences, ``--precision auto``:

1. the engine's greedy and beam-5 batches of those sentences (how many, how large);
2. whether GNU OpenMP survives a fork: a parent runs a two-thread product, forks, and the
   child runs one with 2 threads, then with 1 (each in its own process, killed after
   ``--hang`` seconds);
3. forked children decoding half of the sentences each with one thread: one child alone, then
   two at once; per pass its wall, user and system seconds and minor page faults (a first pass
   pays for new shapes and fresh memory; do two children slow each other, or each pay it?);
4. with the variant's ``minitrans.processes`` importable: one translator of one worker (the
   caller's two threads) against one of the default workers (forked processes), alternated in
   one warm process (``--rounds`` rounds of two passes after a 50-sentence warm-up), the share
   of identical outputs; then, each in a fresh process, the proportional set size of the
   process and its worker processes after a pass (``/proc/PID/smaps_rollup``: a shared page
   counts once, divided among the processes that map it).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

OPENMP_CHILD = """
import os, torch
torch.set_num_threads(2)
a = torch.randn(1500, 1500)
(a @ a).sum(); torch.randn(10 ** 7).exp().sum()  # the parent uses OpenMP with two threads
pid = os.fork()
if pid == 0:
    torch.set_num_threads({threads})
    torch.randn(10 ** 7).exp().sum(); (a @ a).sum()
    os._exit(0)
os.waitpid(pid, 0)
"""


def openmp_after_fork(hang: int) -> None:
    for threads in (2, 1):
        try:
            subprocess.run([sys.executable, "-c", OPENMP_CHILD.format(threads=threads)], timeout=hang, check=True)
            print(f"  a child of {threads} thread(s) after the parent's OpenMP: finished")
        except subprocess.TimeoutExpired:
            print(f"  a child of {threads} thread(s) after the parent's OpenMP: still waiting after {hang} s (killed)")


def forked_children(translator, halves, beam: int) -> None:
    import torch

    for count in (1, 2):
        read, write = os.pipe()
        children = []
        for k in range(count):
            pid = os.fork()
            if pid == 0:
                torch.set_num_threads(1)
                translator.translate(halves[k][:25], beam_size=beam)
                os.read(read, 1)  # start together
                lines = []
                for number in (1, 2, 3):
                    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
                    translator.translate(halves[k], beam_size=beam)
                    after = resource.getrusage(resource.RUSAGE_SELF)
                    lines.append(f"  {count} child(ren), child {k}, pass {number}: {time.perf_counter() - started:.3f} s "
                                 f"(user {after.ru_utime - before.ru_utime:.3f}, system "
                                 f"{after.ru_stime - before.ru_stime:.3f}), "
                                 f"{after.ru_minflt - before.ru_minflt:,} minor faults\n")
                sys.stdout.write("".join(lines))
                sys.stdout.flush()
                os._exit(0)
            children.append(pid)
        time.sleep(2)
        os.write(write, b"x" * count)
        for pid in children:
            os.waitpid(pid, 0)
        os.close(read)
        os.close(write)


def proportional_mib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            total += sum(int(line.split()[1]) for line in rollup if line.startswith("Pss:"))
    return total // 1024


def warm_comparison(checkpoint: str, sources: list[str], beam: int, rounds: int) -> None:
    from minitrans import Translator

    one = Translator.from_checkpoint(checkpoint, workers=1)
    default = Translator.from_checkpoint(checkpoint)
    for translator in (one, default):
        translator.translate(sources[:50], beam_size=beam)
    rates = {"one worker": [], "default workers": []}
    outputs = {}
    for _ in range(rounds):
        for name, translator in (("one worker", one), ("default workers", default)):
            for _ in range(2):
                started = time.perf_counter()
                outputs[name] = translator.translate(sources, beam_size=beam)
                rates[name].append(len(sources) / (time.perf_counter() - started))
    kind = type(default.engine._pool).__name__
    same = sum(a == b for a, b in zip(outputs["one worker"], outputs["default workers"]))
    print(f"  beam {beam}, sentences/s by pass: " + "; ".join(
        f"{name} " + ", ".join(f"{r:.1f}" for r in values) for name, values in rates.items())
        + f"; default's workers: {kind} of {default.engine.workers}; identical outputs {same} of {len(sources)}")
    default.engine.close()
    for workers in (1, 0):  # each in a fresh process holding that one translator
        out = subprocess.run([sys.executable, __file__, "--checkpoint", checkpoint, "--memory", str(workers),
                              "--beam", str(beam)], capture_output=True, text=True, check=True).stdout
        print(f"  beam {beam}, {'one worker' if workers == 1 else 'default workers'}: {out.strip()}")


def memory(checkpoint: str, workers: int, beam: int) -> None:
    """In a fresh process: one translator, a warm-up and a pass; the proportional set size of
    the process and its worker processes."""
    import torch

    from minitrans import Translator
    from minitrans.evaluate import load_eval_data

    torch.set_num_threads(2)
    sources = load_eval_data("multi30k", "test_2016_flickr", None, None)[0]
    translator = Translator.from_checkpoint(checkpoint, workers=workers)
    translator.translate(sources[:50], beam_size=beam)
    translator.translate(sources, beam_size=beam)
    pool = translator.engine._pool
    children = list(pool._pool._processes) if type(pool).__name__ == "ProcessPool" else []
    print(f"proportional set size after a pass {proportional_mib([os.getpid()] + children)} MiB "
          f"(this process and {len(children)} worker process(es))")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--hang", type=int, default=30, help="seconds before a forked child counts as hung")
    parser.add_argument("--memory", type=int, default=None, help=argparse.SUPPRESS)  # part 4's child
    parser.add_argument("--beam", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    from minitrans.runtime import tune_allocator

    tune_allocator(decoding=True)  # as `minitrans translate` decodes
    if args.memory is not None:
        memory(args.checkpoint, args.memory, args.beam)
        return
    import torch

    from minitrans import Translator
    from minitrans.evaluate import load_eval_data
    from minitrans.native_engine import token_batches
    from minitrans.vocab import EOS_ID

    torch.set_num_threads(2)
    sources = load_eval_data("multi30k", "test_2016_flickr", None, None)[0]
    translator = Translator.from_checkpoint(args.checkpoint, workers=1)
    ids = [p + [EOS_ID] for p in translator.tokenizer.encode(sources)]
    print(f"{args.checkpoint}: precision {translator.engine.precision.name}, {len(sources)} sentences")
    print("1. the engine's batches (sentences each):")
    for beam in (1, 5):
        print(f"  beam {beam}: {[len(b) for b in token_batches(ids, translator.engine.max_tokens, beam)]}")
    print("2. GNU OpenMP after a fork:")
    openmp_after_fork(args.hang)
    print("3. forked children of one thread, each decoding half of the sentences (greedy):")
    order = sorted(range(len(sources)), key=lambda i: len(ids[i]))
    halves = [[sources[i] for n, i in enumerate(order) if n % 2 == part] for part in (0, 1)]
    forked_children(translator, halves, 1)
    try:
        import minitrans.processes  # noqa: F401  (the variant's pool)
    except ImportError:
        print("4. skipped: minitrans.processes is not importable (apply bench/variants/process-workers.patch)")
        return
    print(f"4. one worker against the default (forked processes), warm, {args.rounds} rounds of two passes:")
    for beam in (1, 5):
        warm_comparison(args.checkpoint, sources, beam, args.rounds)


if __name__ == "__main__":
    main()
