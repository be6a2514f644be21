// The page of `minitrans export --format web`: loads the model into onnxruntime-web (WebAssembly),
// translates what is typed, draws the cross-attention of a clicked sentence. No request leaves
// the page's origin; no build step.

import { Translator } from "./translator.js";
import { drawAttention } from "./heatmap.js";
import { addOutputSections, renderResults } from "./results.js";

const $ = (id) => document.getElementById(id);
addOutputSections(document.querySelector("main"));
const EXAMPLES = {
  en: "I don't speak French. Where is the station?\nTwo dogs are playing in the snow.",
  fr: "Je ne parle pas anglais. Où est la gare ?\nDeux chiens jouent dans la neige.",
};
// The smallest module that uses a SIMD instruction (v128): WebAssembly.validate says whether SIMD runs.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0,
  65, 0, 253, 15, 253, 98, 11]);

let translator = null;
let results = [];       // one per input paragraph: {source, text, sentences}
let chosen = [0, 0];    // [paragraph, sentence] whose attention is shown
const attentions = new Map();

function fail(message) {
  $("error").textContent = message;
  $("error").hidden = false;
}

/** A file of the folder as bytes, counting its bytes into the progress bar as they arrive. */
async function fetchBytes(name, progress) {
  const response = await fetch(name);
  if (!response.ok) throw new Error(`${name}: HTTP ${response.status}`);
  const reader = response.body.getReader(), parts = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    size += value.length;
    progress(value.length);
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const part of parts) { bytes.set(part, at); at += part.length; }
  return bytes;
}

async function load() {
  if (typeof WebAssembly !== "object" || !WebAssembly.validate(SIMD_PROBE)) {
    fail("This browser cannot run WebAssembly SIMD, which the model's runtime needs: use a current Chrome, " +
         "Edge, Firefox or Safari (16.4+).");
    $("loading").hidden = true;
    return;
  }
  const manifest = await (await fetch("manifest.json")).json();
  const names = ["encoder.onnx", "decoder.onnx", "tokenizer.json", "ort-wasm-simd-threaded.wasm"];
  const total = names.reduce((sum, n) => sum + manifest.files[n].bytes, 0);
  let got = 0;
  const progress = (n) => {
    got += n;
    $("load-progress").value = Math.min(1, got / total);
    $("load-status").textContent = `loading the model… ${(Math.min(got, total) / 1e6).toFixed(1)} of ${(total / 1e6).toFixed(1)} MB`;
  };
  const ort = await import("./ort.wasm.bundle.min.mjs");
  const threads = self.crossOriginIsolated ? Math.min(4, navigator.hardwareConcurrency || 1) : 1;
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.wasmBinary = await fetchBytes("ort-wasm-simd-threaded.wasm", progress);
  translator = await Translator.fromFolder(ort, "", (name) => fetchBytes(name, progress));
  const { direction: d, model_config: c } = manifest;
  $("source-name").textContent = d.source_name;
  $("target-name").textContent = d.target_name;
  $("direction").textContent = `${d.source_name} → ${d.target_name}`;
  $("source").value = EXAMPLES[d.source] || "";
  $("model-info").textContent = `Model: ${c.n_encoder_layers}+${c.n_decoder_layers} layers, d_model ${c.d_model}, ` +
    `${(manifest.parameters / 1e6).toFixed(1)}M parameters, ${manifest.precision}, ` +
    `onnxruntime-web ${manifest.runtime.version} on ${threads} thread${threads > 1 ? "s" : ""}.`;
  $("loading").hidden = true;
  $("translate").disabled = false;
  document.body.dataset.ready = "1";
}

async function translate() {
  $("error").hidden = true;
  $("translate").disabled = true;
  const beam = Math.max(1, Math.min(16, Number($("beam").value) || 1));
  const started = performance.now();
  try {
    const paragraphs = $("source").value.split(/\r\n|\n|\r/).filter((p) => p.trim());
    results = [];
    attentions.clear();
    for (const p of paragraphs) {
      const r = await translator.translate(p, { beam }, (done, all) => {
        $("latency").textContent = `sentence ${done} of ${all}…`;
      });
      results.push({ source: p, ...r });
    }
    chosen = [0, 0];
    $("latency").textContent = `${Math.round(performance.now() - started)} ms`;
    showResults();
    await renderAttention();
  } catch (e) {
    fail(`Translation failed: ${e.message || e}`);
  } finally {
    $("translate").disabled = false;
  }
}

function showResults() {
  // In the shape both pages draw (results.js): the translator's `text` is a `translation`.
  const shown = results.map((r) => ({
    source: r.source, translation: r.text, truncated: r.sentences.some((s) => s.truncated),
    sentences: r.sentences.map((s) => ({ source: s.source, translation: s.text })),
  }));
  renderResults($("results"), shown, chosen, (i, j) => { chosen = [i, j]; showResults(); renderAttention(); });
}

async function renderAttention() {
  const sentence = results[chosen[0]]?.sentences[chosen[1]];
  if (!sentence || !sentence.srcIds) { $("attention-section").hidden = true; return; }
  const key = chosen.join(":");
  if (!attentions.has(key)) attentions.set(key, await translator.attention(sentence));
  const att = attentions.get(key);
  $("attention-section").hidden = false;
  $("attention-title").textContent = sentence.text;
  drawAttention({ table: $("heatmap"), layerSelect: $("layer"), headSelect: $("head"), src: att.src, tgt: att.tgt,
                  layers: att.weights });
}

$("translate").addEventListener("click", translate);
$("layer").addEventListener("change", renderAttention);
$("head").addEventListener("change", renderAttention);
$("source").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) translate(); });
load().catch((e) => fail(`The model could not be loaded: ${e.message || e}`));
