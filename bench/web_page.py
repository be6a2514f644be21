"""The page of ``minitrans export --format web`` measured in Chromium against the native engine
(issue #46): folder size, time to the first translation on a cold page, sentences/s greedy and
beam 5 in fp32 and int8, BLEU through the page's own code, and one short sentence's latency.

    MINITRANS_DATA=../shared/data python bench/web_page.py --checkpoint runs/quickstart/checkpoints/best.ckpt \
        --runtime onnxruntime-web-1.31.1.tgz [--lines 1000]

Exports the checkpoint twice (fp32, int8) into a temporary folder, serves it on loopback with
Python's static server and drives Debian's Chromium (one thread: the page is not cross-origin
isolated), every request outside the loopback origin blocked and counted. Then, after the browser
has closed (never two jobs on the cores at once), the native engine decodes the same lines in fp32
on one thread (``torch.set_num_threads(1)``, one worker) and with two. BLEU is sacreBLEU against
test_2016_flickr's references.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

SHORT = "Two dogs are playing in the snow."
SCRIPT = """async ([folder, lines, beam]) => {
    const ort = await import(`/${folder}/ort.wasm.bundle.min.mjs`);
    const { Translator } = await import(`/${folder}/translator.js`);
    const t = await Translator.fromFolder(ort, `/${folder}/`);
    await t.translateSentence("Warm up.", { beam });
    const start = performance.now(), out = [];
    for (const line of lines) out.push((await t.translateSentence(line, { beam })).text);
    return { out, seconds: (performance.now() - start) / 1000 };
}"""
LATENCY = """async ([sentence, n]) => {
    const times = [];
    for (let i = 0; i < n; i++) {
        document.querySelector("#source").value = sentence;
        const start = performance.now();
        document.querySelector("#translate").click();
        while (document.querySelector("#translate").disabled || !document.querySelector("#latency").textContent.endsWith("ms"))
            await new Promise((r) => setTimeout(r, 1));
        times.push(performance.now() - start);
        document.querySelector("#latency").textContent = "";
    }
    return times;
}"""


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def folder_size(folder: Path) -> dict[str, float]:
    files = {p.name: p.stat().st_size for p in folder.iterdir()}
    model = sum(files[n] for n in ("encoder.onnx", "decoder.onnx", "tokenizer.json"))
    return {"total_mb": sum(files.values()) / 1e6, "model_mb": model / 1e6,
            "runtime_mb": (files["ort-wasm-simd-threaded.wasm"] + files["ort.wasm.bundle.min.mjs"]) / 1e6}


def in_chromium(root: Path, lines: list[str]) -> dict:
    from playwright.sync_api import sync_playwright

    from conftest import launch_chromium

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    outside, results = [], {}
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        for precision in ("fp32", "int8"):
            context = browser.new_context()  # a cold page: an empty cache
            page = context.new_page()
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(origin)
                       else (outside.append(r.request.url), r.abort()))
            started = time.perf_counter()
            page.goto(f"{origin}/{precision}/")
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            ready = time.perf_counter() - started
            page.fill("#source", SHORT)
            page.click("#translate")
            page.wait_for_function("document.querySelector('#latency').textContent.endsWith('ms')", timeout=60_000)
            first = time.perf_counter() - started
            latencies = page.evaluate(LATENCY, [SHORT, 30])
            results[precision] = {"ready_s": ready, "first_translation_s": first,
                                  "short_ms_median": statistics.median(latencies), "short_ms_min": min(latencies),
                                  "model_info": page.inner_text("#model-info")}
            for beam in (1, 5):
                run = page.evaluate(SCRIPT, [precision, lines, beam])
                results[precision][f"beam{beam}"] = {"sent_s": len(lines) / run["seconds"], "out": run["out"]}
            context.close()
        browser.close()
    server.shutdown()
    results["outside_requests"] = len(outside)
    return results


def native(checkpoint: str, lines: list[str]) -> dict:
    import torch

    from minitrans.translate import Translator

    out = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        translator = Translator.load(checkpoint, engine="native", precision="fp32", workers=1)
        translator.translate(["Warm up."], beam_size=1, split=False)
        for beam in (1, 5):
            started = time.perf_counter()
            hyps = translator.translate(lines, beam_size=beam, split=False)
            out[f"{threads}t beam{beam}"] = {"sent_s": len(lines) / (time.perf_counter() - started), "out": hyps}
        translator.translate([SHORT], beam_size=1)
        times = []
        for _ in range(30):
            started = time.perf_counter()
            translator.translate([SHORT], beam_size=1)
            times.append(1000 * (time.perf_counter() - started))
        out[f"{threads}t short_ms_median"] = statistics.median(times)
    return out


def main() -> None:
    import sacrebleu

    from minitrans.data.heldout import load_eval_data
    from minitrans.export.web import export

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--runtime", default=None, help="the onnxruntime-web tarball (default: cache or npm registry)")
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    sources, refs = load_eval_data("multi30k", "test_2016_flickr", None, None, args.data_dir)
    sources, refs = sources[: args.lines], [r[0] for r in refs][: args.lines]
    bleu = lambda hyps: sacrebleu.corpus_bleu(hyps, [refs]).score  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for precision, name in (("float32", "fp32"), ("int8", "int8")):
            export(args.checkpoint, root / name, precision, runtime=args.runtime)
        sizes = {name: folder_size(root / name) for name in ("fp32", "int8")}
        page = in_chromium(root, sources)
    ref = native(args.checkpoint, sources)
    report = {"sizes": sizes, "outside_requests": page["outside_requests"], "lines": len(sources)}
    for precision in ("fp32", "int8"):
        p = page[precision]
        report[f"page {precision}"] = {k: v for k, v in p.items() if not k.startswith("beam")}
        for beam in (1, 5):
            run = p[f"beam{beam}"]
            same = sum(a == b for a, b in zip(run["out"], ref[f"1t beam{beam}"]["out"]))
            report[f"page {precision}"][f"beam{beam}"] = {"sent_s": round(run["sent_s"], 1), "bleu": round(bleu(run["out"]), 2),
                                                          "identical_to_native_fp32": f"{same}/{len(sources)}"}
    for key, value in ref.items():
        report[f"native fp32 {key}"] = ({"sent_s": round(value["sent_s"], 1), "bleu": round(bleu(value["out"]), 2)}
                                        if isinstance(value, dict) else round(value, 1))
    print(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
