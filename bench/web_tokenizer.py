"""The web page's tokenizer, chosen by measurement (issue #46): minitrans/export/page/tokenizer.js (a port of
SentencePiece's unigram encoder for minitrans's one configuration) against a SentencePiece WASM
build (@mlc-ai/web-tokenizers), both against Python's SentencePiece on every line of the shared
corpora: identical pieces, identical decoding, speed and size.

    MINITRANS_DATA=../shared/data python bench/web_tokenizer.py --checkpoint runs/quickstart/checkpoints/best.ckpt \
        [--mlc mlc-ai-web-tokenizers-0.1.6.tgz]   # `npm pack @mlc-ai/web-tokenizers@0.1.6`

Lines: both sides of Tatoeba and of Multi30k train, the extra English captions, FLORES-200 dev and
newstest2013, each cleaned as every minitrans path cleans (cleaning.py; the page cleans the same way,
checked in tests/export/test_web.py). Speed: lines encoded per second on one thread, in one process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODE = """
import { readFileSync, writeFileSync } from "node:fs";
const [cases, out, mlcPath] = process.argv.slice(2);
const { lines, tokenizer, model } = JSON.parse(readFileSync(cases, "utf8"));
const { Tokenizer } = await import(%r);
const report = {};
let t = new Tokenizer(JSON.parse(readFileSync(tokenizer, "utf8")));
let start = performance.now();
const ours = lines.map((l) => t.encode(l));
report.ours_lines_per_s = lines.length / ((performance.now() - start) / 1000);
report.ours_decoded = ours.map((ids) => t.decode(ids));
report.ours = ours;
if (mlcPath) {
  // a browser build: under Node it asks for CommonJS's require and __filename
  const { createRequire } = await import("node:module");
  globalThis.require = createRequire(mlcPath);
  globalThis.__filename = new URL(mlcPath).pathname;
  await import(mlcPath);
  const mlc = globalThis.tokenizers; // a UMD module: it sets a global
  const m = await mlc.Tokenizer.fromSentencePiece(readFileSync(model).buffer);
  start = performance.now();
  const theirs = lines.map((l) => Array.from(m.encode(l)));
  report.mlc_lines_per_s = lines.length / ((performance.now() - start) / 1000);
  report.mlc = theirs;
  report.mlc_decoded = theirs.map((ids) => m.decode(Int32Array.from(ids)));
}
writeFileSync(out, JSON.stringify(report));
"""


def corpus_lines(data_dir: Path) -> list[str]:
    from minitrans.text.cleaning import clean, without_format_characters

    lines = []
    for pair in (data_dir / "tatoeba-fra-eng" / "fra.txt").read_text(encoding="utf-8").splitlines():
        lines += pair.split("\t")[:2]
    for path in ["multi30k/train.en", "multi30k/train.fr", *sorted(p.relative_to(data_dir).as_posix()
                 for p in (data_dir / "multi30k-captions-en").glob("*") if p.is_file()),
                 *sorted(p.relative_to(data_dir).as_posix() for p in (data_dir / "general-dev").glob("*.??"))]:
        lines += (data_dir / path).read_text(encoding="utf-8", errors="replace").splitlines()
    return [c for c in (clean(without_format_characters(s)) for s in lines) if c]


def main() -> None:
    from minitrans.checkpoint import load_for_inference
    from minitrans.export.web import tokenizer_spec

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--mlc", help="the @mlc-ai/web-tokenizers tarball or its package folder")
    parser.add_argument("--data-dir", default=os.environ.get("MINITRANS_DATA", "data/raw"))
    args = parser.parse_args()
    _, tokenizer, _ = load_for_inference(args.checkpoint)
    lines = corpus_lines(Path(args.data_dir))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "tokenizer.json").write_text(json.dumps(tokenizer_spec(tokenizer)), encoding="utf-8")
        tokenizer.save(tmp / "sp.model")
        (tmp / "cases.json").write_text(json.dumps({"lines": lines, "tokenizer": str(tmp / "tokenizer.json"),
                                                    "model": str(tmp / "sp.model")}), encoding="utf-8")
        mlc = None
        if args.mlc:
            mlc = Path(args.mlc)
            if mlc.is_file():
                with tarfile.open(mlc) as tar:
                    tar.extractall(tmp / "mlc", filter="data")
                mlc = tmp / "mlc" / "package"
            mlc = (mlc / "lib" / "index.js").as_uri()
        script = tmp / "run.mjs"
        script.write_text(NODE % (ROOT / "minitrans" / "export" / "page" / "tokenizer.js").as_uri(), encoding="utf-8")
        started = time.perf_counter()
        want = [tokenizer.sp.encode(line) for line in lines]
        python_s = time.perf_counter() - started
        want_text = [tokenizer.sp.decode_ids(ids) for ids in want]
        subprocess.run(["node", "--max-old-space-size=8000", str(script), str(tmp / "cases.json"), str(tmp / "out.json"),
                        *([mlc] if mlc else [])], check=True)
        got = json.loads((tmp / "out.json").read_text(encoding="utf-8"))
    report = {"lines": len(lines), "python_sentencepiece_lines_per_s": round(len(lines) / python_s),
              "byte_fallback_pieces": sum(tokenizer.sp.is_byte(i) for ids in want for i in ids)}
    for name in ("ours", "mlc"):
        if name not in got:
            continue
        differ = [i for i, (a, b) in enumerate(zip(got[name], want)) if a != b]
        report[name] = {"identical_pieces": f"{len(lines) - len(differ)}/{len(lines)}",
                        "identical_decoding": f"{sum(a == b for a, b in zip(got[name + '_decoded'], want_text))}/{len(lines)}",
                        "lines_per_s": round(got[name + "_lines_per_s"]),
                        "examples": [lines[i] for i in differ[:3]]}
    report["ours"]["bytes"] = (ROOT / "minitrans" / "export" / "page" / "tokenizer.js").stat().st_size
    report["tokenizer.json bytes"] = len(json.dumps(tokenizer_spec(tokenizer), ensure_ascii=False).encode())
    print(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
