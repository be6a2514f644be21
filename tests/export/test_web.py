"""``minitrans export --format web``: the graphs (``minitrans.export.onnx_graphs``) against the
native engine (Python onnxruntime), the JavaScript tokenizer against SentencePiece (``node
--test``), the page's translator under Node against the native engine, and the page itself in
Chromium with every outside request blocked.

onnxruntime-web comes from ``$MINITRANS_WEB_RUNTIME`` (the tarball of ``npm pack
onnxruntime-web@VERSION``, which ``.ci/run`` makes): tests never touch the network.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import shutil
import subprocess
import threading
import unicodedata
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import sacrebleu

from conftest import launch_chromium, needs_chromium, run_main, synthetic_pairs
from minitrans.export import web_runtime
from minitrans.text.cleaning import clean, has_words, without_format_characters
from minitrans.errors import UsageError
from minitrans.translate import Translator
from minitrans.text.vocab import BOS_ID, EOS_ID

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")
RUNTIME = os.environ.get("MINITRANS_WEB_RUNTIME")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed (apt-get install nodejs)")


def runtime_source() -> str:
    """The onnxruntime-web tarball; in CI its absence is a failure, elsewhere a skip."""
    if RUNTIME and Path(RUNTIME).exists():
        return RUNTIME
    message = f"set MINITRANS_WEB_RUNTIME to the tarball of `{web_runtime.HOW}` (.ci/run makes it)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def exported(trained_checkpoint, tmp_path_factory):
    """The test model as two page folders, fp32 and int8, under one root (served together)."""
    from minitrans.export.web import export

    source = runtime_source()
    root = tmp_path_factory.mktemp("web")
    for precision, name in (("float32", "fp32"), ("int8", "int8")):
        export(trained_checkpoint, root / name, precision, runtime=source)
    return root


def sample_sentences(n: int, seed: int) -> list[str]:
    """Sentences of the test model's domain, and a few it has never seen."""
    lines = [en for en, _ in synthetic_pairs(n, seed)]
    odd = ["", "…", "The cat ☕ sleeps.", "Le chat dort.", "A DOG SEES THE BALL", "the the the the the",
           "a " * 80, "The e\u0301le\u0300ve sleeps\u200b.", "🙂🙂 The bird eats 12 345 apples."]
    return odd + lines[: n - len(odd)]


def native_translations(checkpoint, lines, beam=1, split=False):
    """What minitrans's own engine gives in fp32 (the reference every path is held to)."""
    translator = Translator.load(checkpoint, engine="native", precision="fp32", workers=1)
    return translator.translate(lines, beam_size=beam, split=split)


# -- the graphs (Python onnxruntime) ------------------------------------------------------------
def sessions(folder: Path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return tuple(ort.InferenceSession(str(folder / f"{name}.onnx"), options) for name in ("encoder", "decoder"))


def onnx_greedy(graphs, src_ids: list[int], config, max_len_a=1.5, max_len_b=10) -> list[int]:
    """Greedy search over the exported graphs, in Python: the graphs' contract, step by step."""
    encoder, decoder = graphs
    src = np.array([src_ids], dtype=np.int64)
    cross_keys, cross_values = encoder.run(None, {"src": src})
    limit = max(1, min(int(np.float32(max_len_a) * np.float32(len(src_ids)) + max_len_b), config.max_len - 1))
    shape = (config.n_decoder_layers, 1, config.n_heads, 0, config.d_model // config.n_heads)
    keys, values = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    token, out = BOS_ID, []
    for t in range(limit):
        log_probs, keys, values, attention = decoder.run(None, {
            "tokens": np.array([[token]], np.int64), "src": src, "cross_keys": cross_keys,
            "cross_values": cross_values, "self_keys": keys, "self_values": values})
        assert keys.shape[3] == t + 1 and attention.shape == (1, config.n_decoder_layers, config.n_heads, len(src_ids))
        assert np.isneginf(log_probs[0, [0, BOS_ID]]).all()
        token = EOS_ID if t + 1 == limit else int(log_probs[0].argmax())
        if token == EOS_ID:
            return out
        out.append(token)
    return out


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_graphs_give_the_native_greedy_output(exported, trained_checkpoint, precision):
    """fp32: the same pieces as the native engine's fp32 greedy search on 300 sentences (int8:
    nearly all; int8 is held to BLEU, in the browser test)."""
    translator = Translator.load(trained_checkpoint, engine="native", precision="fp32", workers=1)
    lines = sample_sentences(300, seed=31)
    ids = [seq[: translator.config.max_len - 1] + [EOS_ID] for seq in translator.tokenizer.encode([clean(s) for s in lines])]
    native = translator.engine.search(ids, 1, 1.0, 1, 1.5, 10)
    graphs = sessions(exported / precision)
    differ = [i for i, (src, hyps) in enumerate(zip(ids, native))
              if onnx_greedy(graphs, src, translator.config) != hyps[0].tokens]
    if precision == "fp32":
        assert differ == []
    else:
        assert len(differ) <= 15, differ


def test_manifest_and_files(exported, trained_checkpoint):
    from minitrans.text.textio import file_sha256
    from minitrans.export.web import FILES

    folder = exported / "fp32"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert sorted(p.name for p in folder.iterdir()) == sorted(FILES)
    assert manifest["model_sha256"] == file_sha256(trained_checkpoint)
    assert manifest["direction"] == {"source": "en", "target": "fr", "source_name": "English", "target_name": "French"}
    assert manifest["runtime"]["version"] == web_runtime.VERSION and manifest["runtime"]["sha256"] == web_runtime.FILES
    for name, entry in manifest["files"].items():
        assert file_sha256(folder / name) == entry["sha256"], name
    assert json.loads((exported / "int8" / "manifest.json").read_text())["precision"] == "int8"
    assert (folder / "NOTICE.md").read_bytes().isascii()  # served with no charset
    assert '<meta charset="utf-8">' in (folder / "model.html").read_text(encoding="utf-8")
    # int8 weights: the graphs shrink to about a third
    size = lambda f: sum((f / n).stat().st_size for n in ("encoder.onnx", "decoder.onnx"))  # noqa: E731
    assert size(exported / "int8") < 0.5 * size(folder)


# -- the JavaScript tokenizer against SentencePiece (node --test) --------------------------------
def tokenizer_lines(n: int, seed: int = 0) -> list[str]:
    """Lines people type: the corpus's sentences, then the same with emoji, combining marks,
    characters outside the vocabulary, odd whitespace and format characters mixed in."""
    rng = random.Random(seed)
    base = [s for pair in synthetic_pairs(n // 4, seed) for s in pair]
    extras = ["🙂", "👩🏽‍🔬", "e\u0301", "A\u030a", "ß", "œ", "Ω", "東京", "Привет", "العربية", "\u00a0", "\u202f",
              "\t", "  ", "\u200b", "\u00ad", "\ufeff", "\u2028", "\u0085", "\x1c", "’", "«", "»", "…", "1 234,5",
              "ﬁ", "Ⅻ", "①", "\U0001d400", "\u0301", "ǅ", "İ", "ﬀ", "\u0e01\u0e34", "한국어", "\ud7a3", "x\u0308"]
    lines = []
    while len(lines) < n:
        words = rng.choice(base).split(" ")
        for _ in range(rng.randint(0, 4)):
            words.insert(rng.randint(0, len(words)), rng.choice(extras))
        joiner = rng.choice([" ", " ", " ", "  ", "\u00a0", ""])
        lines.append(joiner.join(words))
    return lines


@needs_node
def test_javascript_tokenizer_equals_sentencepiece(exported, trained_checkpoint, tmp_path):
    from minitrans.checkpoint import load_for_inference

    _, tokenizer, _ = load_for_inference(trained_checkpoint)
    lines = tokenizer_lines(10_400)
    cleaned = [clean(without_format_characters(s)) for s in lines]
    ids = tokenizer.encode(cleaned)
    rng = random.Random(1)
    random_ids = [[rng.randrange(tokenizer.vocab_size) for _ in range(rng.randint(0, 12))] for _ in range(2000)]
    sp = tokenizer.sp
    cases = {"tokenizer": str(exported / "fp32" / "tokenizer.json"), "lines": lines, "cleaned": cleaned,
             "has_words": [has_words(c) for c in cleaned], "ids": ids,
             "decoded": [sp.decode_ids(seq) for seq in ids],
             "random_ids": random_ids, "random_decoded": [sp.decode_ids(seq) for seq in random_ids]}
    assert sum(sp.is_byte(i) for seq in ids for i in seq) > 1000  # byte fallback is exercised
    assert any(unicodedata.normalize("NFC", s) != s for s in lines)
    (tmp_path / "cases.json").write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    run_node_tests("tests/export/page/tokenizer.test.mjs", WEB_CASES=str(tmp_path / "cases.json"))


@needs_node
def test_javascript_search_and_segmentation_rules():
    run_node_tests("tests/export/page/search.test.mjs")


def run_node_tests(path: str, **env) -> None:
    proc = subprocess.run([NODE, "--test", path], cwd=ROOT, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


# -- the page's translator under Node --------------------------------------------------------------
def node_translate(folder: Path, lines: list[str], *flags: str) -> list[str]:
    proc = subprocess.run([NODE, str(folder / "translate.mjs"), *flags], input="".join(s + "\n" for s in lines),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


@needs_node
@pytest.mark.parametrize("beam", [1, 5])
def test_node_translator_equals_native(exported, trained_checkpoint, beam):
    """translate.mjs (translator.js, tokenizer.js, search.js, onnxruntime-web) gives the native
    engine's fp32 output, greedy and beam 5, line for line."""
    lines = [s.replace("\n", " ") for s in sample_sentences(300 if beam == 1 else 100, seed=41)]
    got = node_translate(exported / "fp32", lines, "--beam", str(beam))
    want = native_translations(trained_checkpoint, lines, beam)
    assert len(got) == len(lines)
    assert [(i, g) for i, (g, w) in enumerate(zip(got, want)) if g != w] == []


@needs_node
def test_fr_en_checkpoint_gives_an_fr_en_page(trained_fr_en, tmp_path):
    from minitrans.export.web import export

    folder = export(trained_fr_en, tmp_path / "fr-en", runtime=runtime_source())
    manifest = json.loads((folder / "manifest.json").read_text())
    assert (manifest["direction"]["source"], manifest["direction"]["target"]) == ("fr", "en")
    lines = [fr for _, fr in synthetic_pairs(30, 5)]
    assert node_translate(folder, lines) == native_translations(trained_fr_en, lines)


# -- the command line and the runtime's checks ------------------------------------------------------
def test_export_command_writes_the_page(capsys, trained_checkpoint, tmp_path):
    code, out, err = run_main(capsys, "export", "-m", str(trained_checkpoint), "--format", "web", "-o",
                              str(tmp_path / "page"), "--runtime", runtime_source())
    assert code == 0, err
    assert "python -m http.server" in out
    assert (tmp_path / "page" / "index.html").is_file()
    # not over a folder of somebody else's files, --force or not
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    code, _, err = run_main(capsys, "export", "-m", str(trained_checkpoint), "--format", "web", "-o",
                            str(tmp_path / "other"), "--runtime", runtime_source(), "--force")
    assert code != 0 and (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_runtime_refuses_files_that_are_not_the_pinned_ones(tmp_path):
    bad = tmp_path / "onnxruntime-web.tgz"
    bad.write_bytes(b"not the tarball")
    with pytest.raises(UsageError, match="sha256 differs"):
        web_runtime.runtime_files(bad)
    folder = tmp_path / "dist"
    folder.mkdir()
    for name in web_runtime.FILES:
        (folder / name).write_bytes(b"changed")
    with pytest.raises(UsageError, match="sha256 differs"):
        web_runtime.runtime_files(folder)
    with pytest.raises(UsageError, match="no such file"):
        web_runtime.runtime_files(tmp_path / "missing.tgz")


def test_runtime_comes_from_the_cache_and_a_damaged_cache_is_fetched_again(tmp_path, monkeypatch):
    source = runtime_source()
    monkeypatch.setenv("MINITRANS_CACHE", str(tmp_path / "cache"))
    downloads = []

    def download():
        downloads.append(1)
        return Path(source).read_bytes() if Path(source).is_file() else pytest.skip("the runtime is a folder")

    monkeypatch.setattr(web_runtime, "_download", download)
    folder = web_runtime.fill_cache(source)
    assert sorted(p.name for p in folder.iterdir()) == sorted(web_runtime.FILES)
    assert set(web_runtime.runtime_files()) == set(web_runtime.FILES) and downloads == []  # offline: the cache
    (folder / "ort-wasm-simd-threaded.wasm").write_bytes(b"damaged")
    files = web_runtime.runtime_files()
    assert downloads == [1] and web_runtime.sha256(files["ort-wasm-simd-threaded.wasm"]) == \
        web_runtime.FILES["ort-wasm-simd-threaded.wasm"]
    assert (folder / "ort-wasm-simd-threaded.wasm").read_bytes() == files["ort-wasm-simd-threaded.wasm"]


# -- the page in Chromium ------------------------------------------------------------------------------
class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


class _Isolated(_Quiet):
    """A static server that makes its pages cross-origin isolated (what threads need)."""

    def end_headers(self) -> None:
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()


@contextlib.contextmanager
def serving(folder: Path, handler=_Quiet):
    """``folder`` served over loopback by Python's static server (as `python -m http.server`)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def static_server(exported):
    with serving(exported) as url:
        yield url


@needs_chromium
def test_page_in_chromium(static_server, trained_checkpoint):
    """The page loads, translates 20 sentences as the native engine does, keeps a paragraph whole,
    draws the heatmap, and int8 loses at most 0.3 BLEU to fp32 on 200 sentences, with no request
    leaving the page's origin."""
    from playwright.sync_api import sync_playwright

    sentences = [en for en, _ in synthetic_pairs(20, 51)]
    paragraph = " ".join(en for en, _ in synthetic_pairs(3, 52))
    outside = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        page = browser.new_page()

        def route(r):
            if r.request.url.startswith(static_server):
                return r.continue_()
            outside.append(r.request.url)
            return r.abort()

        page.route("**/*", route)
        page.goto(f"{static_server}/fp32/")
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        assert "English → French" in page.inner_text("#direction")
        page.fill("#source", "\n".join(sentences + [paragraph]))
        page.click("#translate")
        page.wait_for_function("document.querySelectorAll('#results > li').length === 21", timeout=30_000)
        items = page.query_selector_all("#results > li")
        got = [li.query_selector(".best").inner_text().strip() for li in items]
        want = native_translations(trained_checkpoint, sentences + [paragraph], split=True)
        assert got[:20] == want[:20]
        assert len(items[20].query_selector_all(".sentence")) == 3 and got[20] == want[20]
        # the heatmap of the paragraph's second sentence: a row per output piece (+ eos), a column per source piece
        items[20].query_selector_all(".sentence")[1].click()
        page.wait_for_function("document.querySelector('#attention-title').textContent.length > 0")
        rows = page.eval_on_selector_all("#heatmap tbody tr", "rows => rows.map(r => r.cells.length - 1)")
        columns = page.eval_on_selector_all("#heatmap thead th", "cells => cells.length - 1")
        assert len(rows) >= 2 and set(rows) == {columns} and columns >= 2
        shade = page.eval_on_selector_all("#heatmap tbody tr:first-child td", "cells => cells.map(c => c.title)")
        assert abs(sum(float(t.rsplit(": ", 1)[1]) for t in shade) - 1) < 0.02  # one piece's weights sum to 1
        # int8 against fp32 through the page's own code, 200 sentences
        pairs = synthetic_pairs(200, 53)
        script = """async ([folder, lines]) => {
            const ort = await import(`/${folder}/ort.wasm.bundle.min.mjs`);
            const { Translator } = await import(`/${folder}/translator.js`);
                    const t = await Translator.fromFolder(ort, `/${folder}/`);
            const out = [];
            for (const line of lines) out.push((await t.translateSentence(line)).text);
            return out;
        }"""
        scores = {}
        for folder in ("fp32", "int8"):
            hyps = page.evaluate(script, [folder, [en for en, _ in pairs]])
            scores[folder] = sacrebleu.corpus_bleu(hyps, [[fr for _, fr in pairs]]).score
        browser.close()
    assert outside == []
    # int8 loses at most 0.3 BLEU (issue #46's bound). On this near-perfect toy model (BLEU ~99)
    # one sentence moves the score by ~0.4 either way, and int8 has scored above fp32 too
    # (99.47 against 99.06 once its training changed): only a loss counts against it.
    assert scores["int8"] >= scores["fp32"] - 0.3, scores


@needs_chromium
@pytest.mark.hostile
def test_page_says_when_a_sentence_was_cut(static_server):
    """Issue #59, item 6: the page translated only the start of an over-long sentence and said
    nothing (the CLI warns, /v1 says `truncated`)."""
    from playwright.sync_api import sync_playwright

    long = " and ".join(["the dog sees the old tree near the river"] * 40) + "."
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        page = browser.new_page()
        page.goto(f"{static_server}/fp32/")
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        page.fill("#source", f"The cat eats the bread.\n{long}")
        page.click("#translate")
        page.wait_for_function("document.querySelectorAll('#results > li').length === 2", timeout=60_000)
        notes = [page.locator(f"#results > li:nth-child({i}) .truncated").count() for i in (1, 2)]
        text = page.inner_text("#results > li:nth-child(2) .truncated")
        browser.close()
    assert notes == [0, 1] and "too long" in text


@needs_chromium
def test_page_says_why_it_cannot_run(static_server, exported):
    """Opened as a file, or in a browser without WebAssembly SIMD: one clear message, no crash."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        page = browser.new_page()
        page.goto((exported / "fp32" / "index.html").as_uri())
        page.wait_for_selector("#error:not([hidden])", timeout=10_000)
        assert "served over HTTP" in page.inner_text("#error") and "python -m http.server" in page.inner_text("#error")
        page = browser.new_page()
        page.add_init_script("WebAssembly.validate = () => false;")
        page.goto(f"{static_server}/fp32/")
        page.wait_for_selector("#error:not([hidden])", timeout=10_000)
        assert "WebAssembly SIMD" in page.inner_text("#error")
        assert page.is_disabled("#translate")
        browser.close()


@needs_chromium
def test_page_uses_threads_where_cross_origin_isolated(exported, trained_checkpoint):
    """Served with COOP/COEP the page runs onnxruntime-web's threads, and translates the same."""
    from playwright.sync_api import sync_playwright

    with serving(exported, _Isolated) as url, sync_playwright() as pw:
        browser = launch_chromium(pw)
        page = browser.new_page()
        page.goto(f"{url}/fp32/")
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        cores = page.evaluate("navigator.hardwareConcurrency")
        assert page.evaluate("self.crossOriginIsolated")
        threads = min(4, cores)
        assert f"on {threads} thread" in page.inner_text("#model-info")
        page.fill("#source", "A man sees the dog.")
        page.click("#translate")
        page.wait_for_function("document.querySelector('#latency').textContent.endsWith('ms')", timeout=30_000)
        text = page.inner_text("#results .best").strip()
        browser.close()
    assert text == native_translations(trained_checkpoint, ["A man sees the dog."], split=True)[0]
