// The cross-attention heatmap of both pages: `minitrans serve`'s and the page of
// `minitrans export --format web`. A table: a row per output piece, a column per source piece,
// each cell as dark as the weight; hovering a row lights the source pieces it attends to.

/** Fill a <select> with [value, label] options, keeping its choice when it is still offered. */
export function fillSelect(select, options, keep) {
  const previous = select.value;
  select.replaceChildren(...options.map(([value, label]) => new Option(label, value)));
  if (keep && options.some(([v]) => v === previous)) select.value = previous;
}

/** Offer the layers and heads of `layers` ([layer][head][T][S]) in the two selects (the last
 *  layer first) and draw the chosen one in `table`; `mean` ([layer][T][S]) is computed when not given. */
export function drawAttention({ table, layerSelect, headSelect, src, tgt, layers, mean = null }) {
  const nLayers = layers.length;
  fillSelect(layerSelect, layers.map((_, i) => [String(i), `${i + 1} of ${nLayers}`]), true);
  if (!layerSelect.dataset.set) { layerSelect.value = String(nLayers - 1); layerSelect.dataset.set = "1"; }
  fillSelect(headSelect, [["mean", "mean over heads"], ...layers[0].map((_, h) => [String(h), `head ${h + 1}`])], true);
  const layer = Number(layerSelect.value), head = headSelect.value;
  const heads = layers[layer];
  const weights = head !== "mean" ? heads[Number(head)]  // (T, S)
    : mean ? mean[layer] : heads[0].map((row, t) => row.map((_, s) => heads.reduce((sum, h) => sum + h[t][s], 0) / heads.length));
  table.replaceChildren();
  const thead = table.createTHead().insertRow();
  thead.append(document.createElement("th"));
  src.forEach((p) => { const th = document.createElement("th"); th.textContent = p; thead.append(th); });
  const tbody = table.createTBody();
  tgt.forEach((p, t) => {
    const row = tbody.insertRow();
    const th = document.createElement("th");
    th.textContent = p;
    row.append(th);
    weights[t].forEach((w, s) => {
      const td = row.insertCell();
      td.className = "cell";
      td.style.background = `rgba(31, 95, 191, ${w.toFixed(3)})`;
      td.title = `${p} → ${src[s]}: ${w.toFixed(3)}`;
    });
    row.addEventListener("mouseenter", () => highlight(table, row, weights[t]));
    row.addEventListener("mouseleave", () => highlight(table, null, null));
  });
}

// Hovering a target piece highlights the source pieces it attends to.
function highlight(table, row, w) {
  table.querySelectorAll("tr.hover").forEach((r) => r.classList.remove("hover"));
  const heads = table.tHead.rows[0].cells;
  for (let s = 1; s < heads.length; s++) {
    heads[s].classList.toggle("lit", !!w && w[s - 1] > 0.5);  // white text only on dark cells
    heads[s].style.background = w ? `rgba(31, 95, 191, ${w[s - 1].toFixed(3)})` : "";
  }
  if (row) row.classList.add("hover");
}
