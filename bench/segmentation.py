"""Sentence segmenters compared on paragraphs made from held-out sentences (issue #28).

    pip install sentencex syntok   # the candidates minitrans does not depend on
    MINITRANS_DATA=../shared/data python bench/segmentation.py [--segmenters pysbd,sentencex,syntok,regex]
    python bench/segmentation.py --worst-case   # pysbd's quadratic time, whole and in minitrans's windows
    python bench/segmentation.py --segmenters pysbd,regex,argos-onnx   # the splitter of minitrans's Argos packages
    python bench/segmentation.py --segmenters pysbd,intl   # the web page's (Intl.Segmenter, under Node)
    MINITRANS_DATA=../shared/data python bench/segmentation.py --fast-path   # lines minitrans keeps whole vs pysbd

Each test set joins k consecutive sentences (k = 2, 3, 5 in turn) of a held-out split with one
space: Tatoeba test (minitrans's grouped split), Multi30k test_2016_flickr and FLORES-200 dev,
on the English side and on the French side. The gold boundaries are the offsets where a joined
sentence starts; a segmenter's are where each of its sentences after the first starts.
Precision, recall and F1 are over boundaries, pooled over the set. Each set is scored twice:
*as is*, and *clean*: without the lines no segmenter can place (no end punctuation: 5% of
Multi30k's captions, "A child is splashing in the water") and without the lines every
candidate cuts at the same place (lines that are two sentences, "Hi. How are you?": 10% of
FLORES's). As is, such a line counts against recall or precision whatever the segmenter does;
the share of gold lines a segmenter cuts inside is printed too. Speed is sentences per second on one
thread. Only segmenters that run offline from their wheel are candidates: ``wtpsplit`` and
``minisbd`` download their models at run time (and minisbd is AGPL), so they are not.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path

KS = (2, 3, 5)


def paragraphs(sentences: list[str]) -> list[tuple[str, set[int], list[tuple[int, int]]]]:
    """``(text, gold boundaries, spans of its sentences)`` for k = 2, 3, 5 in turn."""
    out, i, turn = [], 0, 0
    while i < len(sentences):
        group = [s.strip() for s in sentences[i:i + KS[turn % len(KS)]] if s.strip()]
        i += KS[turn % len(KS)]
        turn += 1
        text, bounds, spans = "", set(), []
        for s in group:
            if text:
                text += " "
                bounds.add(len(text))
            spans.append((len(text), len(text) + len(s)))
            text += s
        if group:
            out.append((text, bounds, spans))
    return out


def starts(text: str, pieces: list[str]) -> list[int]:
    """Where each returned sentence starts in ``text`` (segmenters may drop or keep spaces)."""
    found, at = [], 0
    for piece in pieces:
        piece = piece.strip()
        if not piece:
            continue
        where = text.find(piece, at)
        if where < 0:  # a segmenter that rewrote the text: place it by its first word
            where = text.find(piece.split()[0], at)
        if where < 0:
            continue
        found.append(where)
        at = where + len(piece)
    return found


def segmenter(name: str, lang: str):
    """A function text -> list of sentence strings."""
    if name == "pysbd":
        import pysbd

        seg = pysbd.Segmenter(language=lang, clean=False)
        return lambda text: seg.segment(text)
    if name == "sentencex":
        from sentencex import segment

        return lambda text: list(segment(lang, text))
    if name == "syntok":
        import syntok.segmenter as syn

        def run(text: str) -> list[str]:
            return [text[s[0].offset:s[-1].offset + len(s[-1].value)]
                    for para in syn.analyze(text) for s in para if s]
        return run
    if name == "argos-onnx":  # the rules minitrans's Argos packages carry (minitrans/export/sentence_onnx.py), run by MiniSBD
        import tempfile

        from minisbd import SBDetect

        from minitrans.export import sentence_onnx

        detector = SBDetect(str(sentence_onnx.write(Path(tempfile.mkdtemp()) / f"{lang}.onnx", lang)), use_gpu=False)
        return detector.sentences
    if name == "intl":  # the page of `export --format web`: Intl.Segmenter through minitrans/export/page/segment.js, under Node
        return _node_segmenter(lang)
    if name == "regex":  # the baseline a library must beat: end punctuation, space, capital
        pattern = re.compile(r"(?<=[.!?…])[\"'»”)]*\s+(?=[\"'«“(]*[A-ZÀ-Ý0-9])")
        return lambda text: pattern.split(text)
    raise SystemExit(f"unknown segmenter {name}")


_NODE_SPLIT = """
import { split } from "%s";
import readline from "node:readline";
for await (const line of readline.createInterface({ input: process.stdin })) {
  const { text, lang, abbreviations } = JSON.parse(line);
  process.stdout.write(JSON.stringify(split(text, lang, abbreviations).sentences) + "\\n");
}
"""


def _node_segmenter(lang: str):
    """segment.js's split (Intl.Segmenter and the page's rules) in one long-lived Node process."""
    import json
    import subprocess

    from minitrans.export.sentence_onnx import ABBREVIATIONS

    abbreviations = list(ABBREVIATIONS.get(lang, ()))
    module = (Path(__file__).resolve().parent.parent / "minitrans" / "export" / "page" / "segment.js").as_uri()
    proc = subprocess.Popen(["node", "--input-type=module", "-e", _NODE_SPLIT % module], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def run(text: str) -> list[str]:
        proc.stdin.write(json.dumps({"text": text, "lang": lang, "abbreviations": abbreviations}) + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())
    return run


def load_sets(data_dir: str) -> dict[str, list[str]]:
    from minitrans.data.heldout import load_eval_data

    sets = {}
    for dataset, split in (("tatoeba", "test"), ("multi30k", "test_2016_flickr")):
        en, refs = load_eval_data(dataset, split, None, None, data_dir)
        sets[f"{dataset} en"], sets[f"{dataset} fr"] = en, [r[0] for r in refs]
    general = Path(data_dir) / "general-dev"
    for lang in ("en", "fr"):
        sets[f"flores {lang}"] = (general / f"flores200.dev.{lang}").read_text(encoding="utf-8").splitlines()
    return sets


END = re.compile(r"[.!?…][\"'»”)\]]*\s*$")


def clean_lines(sentences: list[str], segs: list) -> list[str]:
    """The lines that end like a sentence and that not every segmenter cuts at one place."""
    kept = []
    for line in sentences:
        line = line.strip()
        if not END.search(line):
            continue
        cuts = [tuple(starts(line, seg(line))[1:]) for seg in segs]
        if all(cuts) and len(set(cuts)) == 1:
            continue
        kept.append(line)
    return kept


def score(seg, paras) -> dict[str, float]:
    tp = fp = fn = cut_inside = lines = 0
    started = time.perf_counter()
    predicted = [set(starts(text, seg(text))) - {0} for text, _, _ in paras]
    seconds = time.perf_counter() - started
    for (_, gold, spans), pred in zip(paras, predicted):
        tp += len(gold & pred)
        fp += len(pred - gold)
        fn += len(gold - pred)
        lines += len(spans)
        cut_inside += sum(any(a < b < c for b in pred) for a, c in spans)
    p, r = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
    return {"p": p, "r": r, "f1": 2 * p * r / max(p + r, 1e-12), "inside": cut_inside / max(lines, 1),
            "sent_s": lines / max(seconds, 1e-9)}


def fast_path(data_dir: str, limit: int) -> None:
    """The lines :mod:`minitrans.text.segment` keeps whole without asking pysbd, against pysbd's
    answer for them: the first ``limit`` lines of every corpus file, each language with its rules."""
    from unittest import mock

    from minitrans.text import segment

    root = Path(data_dir)
    files = {lang: sorted(root.glob(f"*/*.{lang}")) for lang in ("en", "fr")}
    tatoeba = [line.split("\t") for line in
               (root / "tatoeba-fra-eng" / "fra.txt").read_text(encoding="utf-8").splitlines()[:limit]]
    for lang, paths in files.items():
        lines = [line for path in paths for line in path.read_text(encoding="utf-8").splitlines()[:limit]]
        lines += [pair[0 if lang == "en" else 1] for pair in tatoeba if len(pair) > 1]
        kept = [line for line in lines if line.strip() and len(line) <= segment.WINDOW
                and segment._one_sentence(line.strip())]
        started = time.perf_counter()
        fast = [segment._sentence_spans(line, lang) for line in kept]
        fast_s = time.perf_counter() - started
        started = time.perf_counter()
        with mock.patch.object(segment, "_one_sentence", lambda body: False):
            slow = [segment._sentence_spans(line, lang) for line in kept]
        slow_s = time.perf_counter() - started
        differ = [line for line, a, b in zip(kept, fast, slow) if a != b]
        print(f"{lang}: {len(lines):,} lines, {len(kept):,} kept whole without pysbd, {len(differ):,} where "
              f"pysbd disagrees; {1e6 * fast_s / max(len(kept), 1):.1f} µs a line against pysbd's "
              f"{1e6 * slow_s / max(len(kept), 1):.0f}")
        for line in differ[:5]:
            print("  ", repr(line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segmenters", default="pysbd,sentencex,syntok,regex")
    parser.add_argument("--data-dir", default=os.environ.get("MINITRANS_DATA", "data/raw"))
    parser.add_argument("--worst-case", action="store_true",
                        help="only time pysbd on 60,000 characters of 'a. ', whole and through minitrans.text.segment")
    parser.add_argument("--fast-path", action="store_true",
                        help="only check the lines minitrans keeps whole without pysbd against pysbd")
    parser.add_argument("--limit", type=int, default=20_000, help="--fast-path: lines read from each corpus file")
    args = parser.parse_args()
    if args.fast_path:
        return fast_path(args.data_dir, args.limit)
    if args.worst_case:
        from minitrans.text.segment import split

        text = "a. " * 20_000
        for name, run in (("pysbd, whole", segmenter("pysbd", "en")), ("minitrans.text.segment.split (windows)", split)):
            started = time.perf_counter()
            run(text)
            print(f"{name}: {time.perf_counter() - started:.1f} s for {len(text):,} characters")
        return
    sets = load_sets(args.data_dir)
    names = args.segmenters.split(",")
    print("| set | paragraphs | boundaries | " + " | ".join(f"{n} P / R / F1" for n in names) + " |")
    print("|---|---:|---:|" + "---|" * len(names))
    speed: dict[str, list[float]] = {n: [] for n in names}
    inside: dict[str, list[str]] = {n: [] for n in names}
    for label, all_lines in sets.items():
        lang = label.split()[-1]
        usable = [n for n in names if not (n == "syntok" and lang == "fr")]  # syntok: en, de, es
        for view, sentences in (("as is", all_lines),
                                ("clean", clean_lines(all_lines, [segmenter(n, lang) for n in usable]))):
            paras = paragraphs(sentences)
            cells = []
            for name in names:
                if name not in usable:
                    cells.append("— (no French)")
                    continue
                m = score(segmenter(name, lang), paras)
                cells.append(f"{m['p']:.4f} / {m['r']:.4f} / **{m['f1']:.4f}**")
                if view == "as is":
                    speed[name].append(m["sent_s"])
                    inside[name].append(f"{label} {100 * m['inside']:.1f}%")
            n_bounds = sum(len(b) for _, b, _ in paras)
            print(f"| {label}, {view} ({len(sentences):,} lines) | {len(paras):,} | {n_bounds:,} | "
                  + " | ".join(cells) + " |")
    print()
    for name in names:
        if speed[name]:
            print(f"{name}: {min(speed[name]):,.0f}-{max(speed[name]):,.0f} sentences/s; "
                  f"gold lines cut inside: {', '.join(inside[name])}")


if __name__ == "__main__":
    main()
