"""Is the GIL what limits thread workers? Two one-thread processes (no shared GIL) against one
process with two thread workers, same sentences, beam 5 (or ``--beam N``; greedy ``--beam 1``,
which one process decodes on its two threads), alternated rounds (issue #13).

    MINITRANS_DATA=../shared/data python bench/benchmark_processes.py \\
        --checkpoint runs/multi30k-small/avg-top3.ckpt [--rounds 3] [--beam 5]

The test set is split into two halves of alternate lines (the same mix of lengths); each half is
decoded by its own ``minitrans evaluate --workers 1`` process with one thread, both at once. Its
rate is the whole set over the slower half's decoding time (model loading and start-up excluded,
as in the thread-worker process's own ``sentences_per_second``), an upper bound for process
workers that would also pay to pass sentences and results between processes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from minitrans.evaluate import load_eval_data


def evaluate(checkpoint: str, args: list[str], threads: int, workdir: Path) -> subprocess.Popen:
    """A ``minitrans evaluate`` process printing its JSON report."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    return subprocess.Popen([sys.executable, "-m", "minitrans", "evaluate", "-c", checkpoint, *args,
                             "--output-dir", str(workdir / "out")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def rate(process: subprocess.Popen) -> float:
    out, _ = process.communicate()
    if process.returncode:
        raise SystemExit(f"minitrans evaluate failed (exit {process.returncode})")
    return json.loads(out)["sentences_per_second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--beam", type=int, default=5, help="beam size (1 = greedy)")
    args = parser.parse_args()
    from minitrans import languages
    from minitrans.engines import load_metadata

    if languages.of(load_metadata(args.checkpoint)) != ("en", "fr"):
        raise SystemExit(f"{args.checkpoint} is not an English→French model; this benchmark reads English sources.")
    sources, refs = load_eval_data("multi30k", args.split, None, None)
    with tempfile.TemporaryDirectory(prefix="minitrans-halves-") as tmp:
        workdir = Path(tmp)
        halves = []
        for h in (0, 1):
            src, ref = workdir / f"src{h}.en", workdir / f"ref{h}.fr"
            src.write_text("".join(s + "\n" for s in sources[h::2]), encoding="utf-8")
            ref.write_text("".join(r[0] + "\n" for r in refs[h::2]), encoding="utf-8")
            halves.append(["--src", str(src), "--ref", str(ref), "--workers", "1", "--beam", str(args.beam)])
        print(f"{len(sources)} sentences of multi30k {args.split}, beam {args.beam}, sentences/s")
        print("| round | two processes × 1 thread (halves at once) | one process, two threads (beam search: two thread workers) |")
        print("|---|---:|---:|")
        for round_ in range(1, args.rounds + 1):
            running = [evaluate(args.checkpoint, half, 1, workdir) for half in halves]
            seconds = max(len(sources[h::2]) / rate(p) for h, p in enumerate(running))
            threads = rate(evaluate(args.checkpoint, ["--dataset", "multi30k", "--split", args.split,
                                                      "--workers", "2", "--beam", str(args.beam)], 2, workdir))
            print(f"| {round_} | {len(sources) / seconds:.1f} | {threads:.1f} |", flush=True)


if __name__ == "__main__":
    main()
