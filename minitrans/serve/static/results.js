// The output and attention views both pages share: `minitrans serve`'s page (app.js) and the page of
// `minitrans export --format web` (page.js, which gets a copy of this file beside it). Written once.

// The two sections after the input: the translations, and the cross-attention of a chosen sentence.
const SECTIONS = `
  <section class="output">
    <h2 id="target-name">French</h2>
    <ol id="results"></ol>
  </section>
  <section class="attention" id="attention-section" hidden>
    <h2>Cross-attention of <q id="attention-title"></q></h2>
    <div class="controls">
      <label>decoder layer <select id="layer"></select></label>
      <label>head <select id="head"></select></label>
    </div>
    <p class="caption">Click a sentence of a translation to see its attention.
      Each row shows how strongly one output piece attended to each source piece.
      Attention weights are not an explanation of the translation.</p>
    <div class="heatmap-wrap"><table id="heatmap"></table></div>
  </section>`;

/** Put the output and attention sections at the end of `main` (the page's <main>). */
export function addOutputSections(main) {
  main.insertAdjacentHTML("beforeend", SECTIONS);
}

/**
 * Draw `results` into the list `list`, one item per input paragraph. A result is
 * {source, translation, sentences: [{source, translation, confidence?, low_confidence?}], truncated?,
 *  nbest?: [{translation, score}], score?, confidence?, low_confidence?}. `chosen` is the
 * [paragraph, sentence] shown in the attention view; a click calls `choose(paragraph, sentence)`.
 */
export function renderResults(list, results, chosen, choose) {
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
        span.addEventListener("click", (e) => { e.stopPropagation(); choose(i, j); });
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
    if (r.truncated) li.append(truncatedNote());
    if (r.nbest && r.nbest.length > 1) {
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
    li.addEventListener("click", () => choose(i, 0));
    list.append(li);
  });
}

// Said wherever a sentence was longer than the model reads: only its start was translated.
function truncatedNote() {
  const note = document.createElement("div");
  note.className = "truncated";
  note.setAttribute("role", "note");
  note.textContent = "⚠ A sentence was too long for the model: only its start was translated. Split it into " +
    "shorter sentences.";
  return note;
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
