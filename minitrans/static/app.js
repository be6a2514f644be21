// minitrans web page: plain JavaScript (a module), no build step, no external assets.
import { drawAttention } from "./heatmap.js";

const $ = (id) => document.getElementById(id);
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
  } catch (e) { /* the page works without it */ }
}

async function translate() {
  // Each non-blank line is a text (a paragraph); blank lines separate them and give no item.
  const lines = $("source").value.split("\n").filter((line) => line.trim());
  if (!lines.length) return;
  const [source, target] = $("direction").value.split("-");
  const body = { q: lines, beam: Number($("beam").value), nbest: Number($("nbest").value),
                 attention: withAttention, source, target };
  $("translate").disabled = true;
  $("error").hidden = true;
  const started = performance.now();
  try {
    const headers = { "Content-Type": "application/json" };
    if ($("api-key").value) headers["X-API-Key"] = $("api-key").value;
    const post = (b) => fetch("/v1/translate", { method: "POST", headers, body: JSON.stringify(b) });
    let response = await post(body);
    let data = await response.json();
    if (response.status === 413 && body.attention && String(data.detail).includes("max_attention_values")) {
      // Too much text for attention weights: translate it all the same, without the heatmap.
      response = await post({ ...body, attention: false });
      data = await response.json();
    }
    if (!response.ok) {
      const detail = Array.isArray(data.detail) ? data.detail.map((d) => `${d.loc.slice(-1)[0]}: ${d.msg}`).join("; ") : data.detail;
      throw new Error(`${response.status}: ${detail}`);
    }
    results = data.translations;
    chosen = [Math.max(0, results.findIndex((r) => r.translation)), 0];
    $("latency").textContent = `${Math.round(performance.now() - started)} ms in the browser, ` +
      `${data.latency_ms} ms on the server`;
    renderResults();
    renderAttention();
  } catch (e) {
    $("error").textContent = e.message;
    $("error").hidden = false;
  } finally {
    $("translate").disabled = false;
  }
}

function renderResults() {
  const list = $("results");
  list.replaceChildren();
  results.forEach((r, i) => {
    const li = document.createElement("li");
    li.className = i === chosen[0] ? "chosen" : "";
    li.dataset.index = i;
    const best = document.createElement("div");
    best.className = "best";
    const sentences = r.sentences || [];
    if (sentences.length > 1) {
      // A paragraph: one clickable span per sentence, for its attention view.
      sentences.forEach((s, j) => {
        const span = document.createElement("span");
        span.className = "sentence" + (i === chosen[0] && j === chosen[1] ? " chosen" : "") +
          (s.low_confidence ? " low" : "");
        span.textContent = s.translation;
        span.title = s.source + confidenceNote(s);
        span.addEventListener("click", (e) => { e.stopPropagation(); chosen = [i, j]; renderResults(); renderAttention(); });
        best.append(span, " ");
      });
    } else {
      best.textContent = r.translation;
      if (r.low_confidence) best.classList.add("low");
      best.title = confidenceNote(r).trim();
    }
    const src = document.createElement("div");
    src.className = "src";
    src.textContent = r.source;
    li.append(best, src);
    if (r.nbest.length > 1) {
      // The best is shown above: list the others, each with its score, named.
      const alts = document.createElement("ol");
      alts.className = "alts";
      alts.start = 2;
      alts.setAttribute("aria-label", "other translations");
      r.nbest.slice(1).forEach((alt) => {
        const a = document.createElement("li");
        a.textContent = alt.translation;
        a.append(" ", scoreLabel(alt.score));
        alts.append(a);
      });
      const label = document.createElement("div");
      label.className = "alts-label";
      label.textContent = "other translations";
      label.append(" ", scoreLabel(r.score, "best"));
      li.append(label, alts);
    }
    li.addEventListener("click", () => { chosen = [i, 0]; renderResults(); renderAttention(); });
    list.append(li);
  });
}

// A search score, labelled: the length-normalised log-probability (higher is better; 0 is certain).
function scoreLabel(score, which = "") {
  const s = document.createElement("span");
  s.className = "score";
  if (score === null || score === undefined) return s;
  s.textContent = `${which ? which + " " : ""}score ${score.toFixed(3)}`;
  s.title = "the search's score: log-probability divided by a length penalty (higher is better, 0 is certain); " +
    "comparable between the alternatives of one sentence, not between sentences";
  return s;
}

// The model's own confidence, as a tooltip; "low" only for a calibrated model (minitrans calibrate).
function confidenceNote(r) {
  if (r.confidence === null || r.confidence === undefined) return "";
  const low = r.low_confidence ? "low confidence: check this sentence; " : "";
  return `\n${low}model confidence ${r.confidence.toFixed(2)} (its own probability per word, not a quality guarantee)`;
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
