// minitrans web page: plain JavaScript (a module), no build step, no external assets.
import { drawAttention } from "./heatmap.js";
import { addOutputSections, renderResults } from "./results.js";

const $ = (id) => document.getElementById(id);
addOutputSections(document.querySelector("main"));
let results = [];      // the last response's translations, one per input line
let chosen = [0, 0];   // [line, sentence] whose attention is shown
let withAttention = true;  // false when the server runs an engine without attention weights
let models = {};           // "en-fr" -> that direction's /v1/models entry
const NAMES = { en: "English", fr: "French" };
const EXAMPLES = {
  en: "I don't speak French. Where is the station?\nTwo dogs are playing in the snow.",
  fr: "Je ne parle pas anglais. Où est la gare ?\nDeux chiens jouent dans la neige.",
};

function showModel() {
  const info = models[$("direction").value];
  if (!info) return;
  const c = info.model_config;
  withAttention = Boolean(info.decoding.attention);  // a native model, or a .ckpt with a native copy
  const [src, tgt] = [info.source_language, info.target_language];
  $("source-name").textContent = NAMES[src] || src;
  $("target-name").textContent = NAMES[tgt] || tgt;
  if (Object.values(EXAMPLES).includes($("source").value) && EXAMPLES[src]) $("source").value = EXAMPLES[src];
  $("model-info").textContent = `Model: ${c.n_encoder_layers}+${c.n_decoder_layers} layers, d_model ${c.d_model}, ` +
    `${(info.parameters / 1e6).toFixed(1)}M parameters, ${info.vocab_size} pieces, ${info.engine} engine.`;
}

async function loadModelInfo() {
  try {
    const list = (await (await fetch("/v1/models")).json()).models;
    models = Object.fromEntries(list.map((m) => [`${m.source_language}-${m.target_language}`, m]));
    $("direction").replaceChildren(...list.map((m) => new Option(
      `${NAMES[m.source_language] || m.source_language} → ${NAMES[m.target_language] || m.target_language}`,
      `${m.source_language}-${m.target_language}`)));
    showModel();
    const settings = await (await fetch("/frontend/settings")).json();
    $("api-key-label").hidden = !settings.keyRequired;  // minitrans serve --api-keys
    if (settings.limits) limits = settings.limits;
  } catch (e) { /* the page works without it */ }
}

// What one request may hold (/frontend/settings' limits); long input is sent in several requests.
let limits = { maxSentences: 64, maxChars: 2000, maxRequestChars: 128000 };
// Where a paragraph may be cut between two requests: after an end mark (and closing quotes), before a space.
const SENTENCE_END = /(?<=[.!?…。！？]["'»”)\]]*)\s+/g;
const WINDOW = 500;  // minitrans.text.segment.WINDOW: the longest stretch the server's splitter reads at once

// A paragraph cut into pieces of at most `n` sentences (as the end marks count them) and `chars`
// characters, each with the gap that followed it: [{text, gap}]. The server splits each piece again.
function cut(text, n, chars) {
  const parts = [];
  let at = 0;
  for (const m of text.matchAll(SENTENCE_END)) {
    parts.push({ text: text.slice(at, m.index), gap: m[0] });
    at = m.index + m[0].length;
  }
  parts.push({ text: text.slice(at), gap: "" });
  // A part longer than the server's splitter window (500 characters) is several sentences to it:
  // cut it where the server does, after the last space of each window.
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    if (part.text.length <= WINDOW) continue;
    const space = part.text.lastIndexOf(" ", WINDOW - 1);
    const at = space > 0 ? space + 1 : WINDOW;
    parts.splice(i, 1, { text: part.text.slice(0, at).trimEnd(), gap: part.text.slice(0, at).match(/\s*$/)[0] },
                 { text: part.text.slice(at), gap: part.gap });
  }
  const pieces = [];
  for (const part of parts) {
    const last = pieces[pieces.length - 1];
    if (last && last.count < n && last.text.length + last.gap.length + part.text.length <= chars) {
      last.text += last.gap + part.text;
      last.gap = part.gap;
      last.count += 1;
    } else {
      pieces.push({ ...part, count: 1 });
    }
  }
  return pieces;
}

// One paragraph's result from its pieces' results, as the server would have given it whole.
function merge(source, pieces, parts) {
  if (parts.length === 1) return parts[0];
  const sentences = parts.flatMap((p) => (p.sentences && p.sentences.length ? p.sentences : [p]));
  const scores = sentences.map((s) => s.score).filter((s) => s !== null && s !== undefined);
  const k = Math.max(...parts.map((p) => p.nbest.length));
  const join = (texts) => texts.map((t, i) => t + pieces[i].gap).join("");
  const nbest = Array.from({ length: k }, (_, j) => ({
    translation: join(parts.map((p) => (p.nbest[Math.min(j, p.nbest.length - 1)] || p).translation)),
    score: null }));
  return { source, translation: join(parts.map((p) => p.translation)), sentences, nbest,
           score: scores.length ? scores.reduce((a, b) => a + b, 0) / scores.length : null,
           truncated: parts.some((p) => p.truncated), low_confidence: parts.some((p) => p.low_confidence),
           confidence: null };
}

async function translate() {
  // Each non-blank line is a text (a paragraph); blank lines separate them and give no item.
  const lines = $("source").value.split("\n").filter((line) => line.trim());
  if (!lines.length) return;
  const [source, target] = $("direction").value.split("-");
  const options = { beam: Number($("beam").value), nbest: Number($("nbest").value), source, target };
  $("translate").disabled = true;
  $("error").hidden = true;
  const started = performance.now();
  try {
    const headers = { "Content-Type": "application/json" };
    if ($("api-key").value) headers["X-API-Key"] = $("api-key").value;
    const post = (b) => fetch("/v1/translate", { method: "POST", headers, body: JSON.stringify(b) });
    // Half the limits per request: the server's splitter may find more sentences than the end marks.
    const perRequest = Math.max(1, Math.floor(limits.maxSentences / 2));
    const charsPerRequest = Math.max(1, Math.floor(limits.maxRequestChars / 2));
    const pieces = lines.map((line) => cut(line, perRequest, charsPerRequest));
    const units = pieces.flatMap((ps, line) => ps.map((p, j) => ({ line, j, ...p })));
    const groups = [];
    for (const u of units) {
      const g = groups[groups.length - 1];
      if (g && g.count + u.count <= perRequest && g.chars + u.text.length <= charsPerRequest) {
        g.units.push(u); g.count += u.count; g.chars += u.text.length;
      } else {
        groups.push({ units: [u], count: u.count, chars: u.text.length });
      }
    }
    const got = pieces.map((ps) => new Array(ps.length));
    let done = 0, serverMs = 0, requests = 0, attention = withAttention;
    const total = units.reduce((n, u) => n + u.count, 0);
    while (groups.length) {
      const group = groups.shift();
      const body = { ...options, q: group.units.map((u) => u.text), attention };
      let response = await post(body);
      let data = await response.json();
      if (response.status === 413 && body.attention && String(data.detail).includes("max_attention_values")) {
        // Too much text for attention weights: translate it all the same, without the heatmap.
        attention = false;
        response = await post({ ...body, attention: false });
        data = await response.json();
      }
      if (response.status === 413 && group.units.length > 1 && String(data.detail).includes("max_sentences")) {
        // The server found more sentences than the end marks said: send the halves on their own.
        const half = Math.ceil(group.units.length / 2);
        groups.unshift({ units: group.units.slice(0, half), count: group.count, chars: 0 },
                       { units: group.units.slice(half), count: 0, chars: 0 });
        continue;
      }
      if (!response.ok) {
        const detail = Array.isArray(data.detail) ? data.detail.map((d) => `${d.loc.slice(-1)[0]}: ${d.msg}`).join("; ") : data.detail;
        throw new Error(`${response.status}: ${detail}`);
      }
      data.translations.forEach((t, i) => { got[group.units[i].line][group.units[i].j] = t; });
      serverMs += data.latency_ms;
      requests += 1;
      done += group.units.reduce((n, u) => n + u.count, 0);
      if (groups.length) $("latency").textContent = `translating… ${done} of ${total} sentences`;
    }
    results = lines.map((line, i) => merge(line, pieces[i], got[i]));
    chosen = [Math.max(0, results.findIndex((r) => r.translation)), 0];
    $("latency").textContent = `${Math.round(performance.now() - started)} ms in the browser, ` +
      `${Math.round(serverMs)} ms on the server` + (requests > 1 ? ` (${requests} requests)` : "");
    showResults();
    renderAttention();
  } catch (e) {
    $("error").textContent = e.message;
    $("error").hidden = false;
  } finally {
    $("translate").disabled = false;
  }
}

function showResults() {
  renderResults($("results"), results, chosen, (i, j) => { chosen = [i, j]; showResults(); renderAttention(); });
}

function renderAttention() {
  const line = results[chosen[0]];
  const r = line && line.sentences && line.sentences.length > 1 ? line.sentences[chosen[1]] : line;
  const att = r && r.attention;
  if (!att || !att.layers.length) { $("attention-section").hidden = true; return; }
  $("attention-section").hidden = false;
  $("attention-title").textContent = r.translation;
  drawAttention({ table: $("heatmap"), layerSelect: $("layer"), headSelect: $("head"), src: att.src_pieces,
                  tgt: att.tgt_pieces, layers: att.layers, mean: att.mean });
}

$("translate").addEventListener("click", translate);
$("layer").addEventListener("change", renderAttention);
$("head").addEventListener("change", renderAttention);
$("direction").addEventListener("change", showModel);
$("source").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) translate(); });
loadModelInfo();
