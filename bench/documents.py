"""A 20-page document through ``minitrans translate``: words/s and peak memory, text and HTML.

    MINITRANS_DATA=../shared/data python bench/documents.py --checkpoint runs/quickstart/checkpoints/best.ckpt \\
        [--words 10000] [--per-paragraph 4]

Builds the document from consecutive FLORES-200 dev sentences (general-dev/flores200.dev.en),
``--per-paragraph`` to a paragraph and blank lines between paragraphs, until it holds
``--words`` words; writes it as plain text and as HTML (a ``<p>`` per paragraph); and runs
``minitrans translate -m CKPT -i doc -o doc.fr`` on each in its own process (its stderr, with the
progress lines and the words/s it reports, is shown), measuring wall time and peak RSS.
"""

from __future__ import annotations

import argparse
import html
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--words", type=int, default=10_000)
    parser.add_argument("--per-paragraph", type=int, default=4)
    parser.add_argument("--data-dir", default=os.environ.get("MINITRANS_DATA", "data/raw"))
    args = parser.parse_args()

    lines = (Path(args.data_dir) / "general-dev" / "flores200.dev.en").read_text(encoding="utf-8").splitlines()
    paragraphs, words, used = [], 0, 0
    while words < args.words and used < len(lines):
        paragraph = " ".join(lines[used:used + args.per_paragraph])
        used += args.per_paragraph
        paragraphs.append(paragraph)
        words += len(paragraph.split())
    print(f"{len(paragraphs)} paragraphs, {words:,} words, {used} FLORES dev sentences")
    with tempfile.TemporaryDirectory() as tmp:
        text, page = Path(tmp) / "doc.txt", Path(tmp) / "doc.html"
        text.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
        page.write_text("<!doctype html>\n<html><body>\n" + "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
                        + "\n</body></html>\n", encoding="utf-8")
        for doc in (text, page):
            started = time.perf_counter()
            run = subprocess.run([sys.executable, "-m", "minitrans", "translate", "-m", args.checkpoint, "-i", str(doc),
                                  "-o", str(doc.with_suffix(".fr" + doc.suffix))], capture_output=True, text=True)
            seconds = time.perf_counter() - started
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # GiB; the largest child so far
            print(run.stderr.strip())
            print(f"{doc.suffix[1:]}: exit {run.returncode}, {seconds:.1f} s wall with loading, "
                  f"{words / seconds:.0f} words/s end to end, peak RSS {peak:.2f} GiB (largest child so far)")


if __name__ == "__main__":
    main()
