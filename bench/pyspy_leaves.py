"""Where a sampled run spends its time: the innermost frame of each py-spy sample, by library.

    py-spy record --native --rate 200 --format raw -o beam.txt -- \\
        minitrans evaluate -m runs/multi30k-small/avg-top3.ckpt --dataset multi30k --split test_2016_flickr
    python bench/pyspy_leaves.py beam.txt [--under "beam_search (minitrans/search.py"] [--top 10]

Only samples whose stack contains ``--under`` count (default: minitrans's beam search). Each is
classed by its innermost frame: a Python frame, or the shared library the native frame lies in
(``libgomp``: OpenMP's runtime, ``libtorch_cpu``: PyTorch's kernels and dispatcher, ...). The
``--top`` innermost native functions follow. py-spy samples the threads that run Python, so an
OpenMP worker thread's own time is not in these counts.
"""

from __future__ import annotations

import argparse
import collections
import re


def leaves(path: str, under: str) -> collections.Counter:
    """Innermost frame -> samples, over the stacks that contain ``under``."""
    counts: collections.Counter = collections.Counter()
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if under in stack:
                counts[stack.split(";")[-1]] += int(n)
    return counts


def where(frame: str) -> str:
    """``name (file.py:line)`` -> "Python"; ``name (libfoo.so.1)`` -> "libfoo"."""
    place = re.search(r"\(([^()]*)\)\s*$", frame)
    place = place.group(1) if place else frame
    if ".py:" in place or place.startswith("<frozen"):
        return "Python"
    return place.split(".so")[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("raw", help="py-spy record --format raw output")
    parser.add_argument("--under", default="beam_search (minitrans/search.py")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    counts = leaves(args.raw, args.under)
    total = sum(counts.values())
    if not total:
        raise SystemExit(f"{args.raw}: no sample under {args.under!r}")
    by_place: collections.Counter = collections.Counter()
    for frame, n in counts.items():
        by_place[where(frame)] += n
    print(f"{total} samples under {args.under!r}")
    for place, n in by_place.most_common():
        print(f"{100 * n / total:5.1f}%  {place}")
    print("innermost native functions:")
    for frame, n in counts.most_common():
        if where(frame) != "Python" and not frame.startswith("0x") and args.top > 0:
            print(f"{100 * n / total:5.1f}%  {frame[:100]}")
            args.top -= 1


if __name__ == "__main__":
    main()
