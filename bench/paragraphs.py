"""Paragraphs against sentences: BLEU of k consecutive test sentences translated as one text.

    MINITRANS_DATA=../shared/data python bench/paragraphs.py --checkpoint runs/quickstart/checkpoints/best.ckpt \\
        [--limit 600] [--ks 2,3,5] [--beam 5]

The first ``--limit`` sentences of Multi30k test_2016_flickr are grouped k at a time and joined
with a space, as a user pastes a paragraph; their references are joined the same way. Three
ways to translate each group are scored with cased sacreBLEU against the joined references:
one sentence per line then joined (the ceiling), the paragraph as one sentence (``split=False``,
what every entry point did before sentence splitting) and the paragraph split into sentences
(the default). Also printed: output words per reference word, and the decoding rate. The
*punctuated* rows keep only the groups whose every sentence ends with end punctuation: 5% of
the captions have none ("A child is splashing in the water"), and no segmenter can find the
end of such a sentence inside a paragraph.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--limit", type=int, default=600)
    parser.add_argument("--ks", default="2,3,5")
    parser.add_argument("--beam", type=int, default=5)
    args = parser.parse_args()

    from minitrans.text import languages
    from minitrans.engines.registry import load_metadata

    if languages.of(load_metadata(args.checkpoint)) != ("en", "fr"):
        raise SystemExit(f"{args.checkpoint} is not an English→French model; this benchmark reads English sources.")
    from minitrans import Translator
    from minitrans.data.heldout import load_eval_data
    from minitrans.metrics import score

    sources, refs = load_eval_data("multi30k", "test_2016_flickr", None, None)
    sources, refs = sources[: args.limit], [r[0] for r in refs[: args.limit]]
    translator = Translator.from_checkpoint(args.checkpoint)
    started = time.perf_counter()
    one_by_one = translator.translate(sources, beam_size=args.beam, split=False)
    base_rate = len(sources) / (time.perf_counter() - started)
    print(f"{len(sources)} sentences of test_2016_flickr, beam {args.beam}; one per line: {base_rate:.1f} sent/s")
    print("| k (groups) | one per line, joined | paragraph as one sentence | paragraph, split (default) "
          "| words out / ref (one line, split) | split: sent/s |")
    print("|---:|---:|---:|---:|---|---:|")
    import re

    ends = re.compile(r"[.!?…][\"'»”)]*\s*$")
    rows = [(k, view) for k in (int(x) for x in args.ks.split(",")) for view in ("all", "punctuated")]
    for k, view in rows:
        groups = [slice(i, i + k) for i in range(0, len(sources) - k + 1, k)]
        if view == "punctuated":
            groups = [g for g in groups if all(ends.search(s) for s in sources[g])]
        paras = [" ".join(sources[g]) for g in groups]
        para_refs = [[" ".join(refs[g]) for g in groups]]
        joined = [" ".join(one_by_one[g]) for g in groups]
        whole = translator.translate(paras, beam_size=args.beam, split=False)
        started = time.perf_counter()
        split = translator.translate(paras, beam_size=args.beam)
        rate = sum(g.stop - g.start for g in groups) / (time.perf_counter() - started)
        ref_words = sum(len(r.split()) for r in para_refs[0])
        bleu = {name: score(hyps, [[r] for r in para_refs[0]])["bleu"]
                for name, hyps in (("joined", joined), ("whole", whole), ("split", split))}
        print(f"| {k}, {view} ({len(groups)}) | {bleu['joined']:.2f} | {bleu['whole']:.2f} | **{bleu['split']:.2f}** | "
              f"{sum(len(h.split()) for h in whole) / ref_words:.2f}, {sum(len(h.split()) for h in split) / ref_words:.2f}"
              f" | {rate:.1f} |")


if __name__ == "__main__":
    main()
