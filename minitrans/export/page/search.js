// Greedy and beam search in JavaScript: minitrans/decoding/search.py's rules, one sentence at a time.
//
// A `model` gives three things (translator.js's OnnxModel over onnxruntime-web; the tests' fakes):
//   encode(srcIds)            -> a state with one row (the source's cross-attention keys/values)
//   step(state, tokens)       -> {logProbs: Float32Array (rows × vocab), state}: one decoder step
//                                for the newest piece of each row (<pad> and <s> at -Infinity)
//   reorder(state, rows)      -> the state with its rows gathered (a beam's row may repeat)
// and `vocabSize`. What is the same as search.py, so that outputs are the same:
// * the length limit a·|source| + b (eos counted, float32 as torch computes it), within
//   1..max_len-1; at the limit eos is the only continuation, at log-probability 0;
// * greedy: the most likely piece each step, the log-probabilities summed in float32;
// * beam: fairseq's scheme. K live hypotheses; the best 2K extensions; those ending in eos that
//   rank among the first K are finished (score = log-probability / ((5 + |Y|) / 6)^α, |Y|
//   counting eos) until K are; the best K that do not end in eos go on. The first step runs one
//   row (every beam holds the same <s>) where 2K ≤ vocabulary, as search.py does. The n-best are
//   the finished hypotheses sorted by score (ties keep finishing order), at most K.

export const BOS = 2, EOS = 3;

/** search.py's length_limits for one source of `srcLength` pieces (eos included). */
export function lengthLimit(srcLength, maxLenA, maxLenB, maxLen) {
  const f = Math.fround;
  const limit = Math.trunc(f(f(f(maxLenA) * srcLength) + maxLenB));
  return Math.min(Math.max(limit, 1), maxLen - 1);
}

export function lengthPenalty(length, alpha) {
  return ((5 + length) / 6) ** alpha;
}

function forceEos(logProbs, rows, vocab) {
  logProbs.fill(-Infinity);
  for (let r = 0; r < rows; r++) logProbs[r * vocab + EOS] = 0;
}

/** The best hypothesis by picking the most likely piece at every step: [{tokens, score, logprob}]. */
export async function greedy(model, srcIds, { maxLenA, maxLenB, maxLen }) {
  const limit = lengthLimit(srcIds.length, maxLenA, maxLenB, maxLen);
  const vocab = model.vocabSize;
  let state = await model.encode(srcIds);
  const tokens = [];
  let logprob = 0, last = BOS;
  for (let t = 0; t < limit; t++) {
    const out = await model.step(state, [last]);
    state = out.state;
    const lp = out.logProbs;
    if (t + 1 === limit) forceEos(lp, 1, vocab);
    let best = 0;
    for (let v = 1; v < vocab; v++) if (lp[v] > lp[best]) best = v;
    logprob = Math.fround(logprob + lp[best]);
    if (best === EOS) break;
    tokens.push(best);
    last = best;
  }
  return [{ tokens, score: logprob, logprob }];
}

/** Indices of the `k` largest values of `values` (NaN-free), best first; ties: lower index first. */
export function topK(values, k) {
  const idx = [], val = [];
  for (let i = 0; i < values.length; i++) {
    const x = values[i];
    if (idx.length === k && !(x > val[k - 1])) continue;
    let j = Math.min(idx.length, k - 1);
    while (j > 0 && x > val[j - 1]) { val[j] = val[j - 1]; idx[j] = idx[j - 1]; j--; }
    val[j] = x; idx[j] = i;
    if (idx.length > k) { idx.length = k; val.length = k; }
  }
  return idx;
}

/** Beam search for one source: the n-best [{tokens, score, logprob}], best first. */
export async function beam(model, srcIds, { beam: k, alpha, nbest = 1, maxLenA, maxLenB, maxLen }) {
  if (k === 1) return greedy(model, srcIds, { maxLenA, maxLenB, maxLen });
  const limit = lengthLimit(srcIds.length, maxLenA, maxLenB, maxLen);
  const vocab = model.vocabSize;
  let rows = 2 * k <= vocab ? 1 : k;
  let state = await model.encode(srcIds);
  if (rows > 1) state = model.reorder(state, new Array(rows).fill(0));
  let prefixes = Array.from({ length: rows }, () => []);
  let scores = Float32Array.from({ length: rows }, (_, r) => (r === 0 ? 0 : -Infinity));
  const finished = [];
  for (let t = 0; t < limit; t++) {
    const out = await model.step(state, prefixes.map((p) => (p.length ? p[p.length - 1] : BOS)));
    state = out.state;
    const cand = out.logProbs; // (rows × vocab), scored in place as search.py's add_
    if (t + 1 === limit) forceEos(cand, rows, vocab);
    for (let r = 0; r < rows; r++) {
      const s = scores[r];
      for (let v = r * vocab, end = v + vocab; v < end; v++) cand[v] = Math.fround(cand[v] + s);
    }
    const top = topK(cand, 2 * k);
    const isEos = top.map((i) => i % vocab === EOS && Number.isFinite(cand[i]));
    const penalty = lengthPenalty(t + 1, alpha);
    for (let j = 0; j < k && j < top.length; j++) {
      if (isEos[j] && finished.length < k) {
        const raw = cand[top[j]];
        finished.push({ tokens: prefixes[Math.floor(top[j] / vocab)].slice(), score: raw / penalty, logprob: raw });
      }
    }
    if (finished.length >= k || limit <= t + 1) break;
    // The best K candidates that are not eos, in rank order (then eos ones, as a stable argsort of is_eos).
    const order = [...top.keys()].filter((j) => !isEos[j]).concat([...top.keys()].filter((j) => isEos[j])).slice(0, k);
    const origins = order.map((j) => Math.floor(top[j] / vocab));
    prefixes = order.map((j, r) => [...prefixes[origins[r]], top[j] % vocab]);
    scores = Float32Array.from(order, (j) => cand[top[j]]);
    state = model.reorder(state, origins);
    rows = order.length;
  }
  const ranked = finished.map((h, i) => [h, i]).sort((a, b) => b[0].score - a[0].score || a[1] - b[1]);
  return ranked.slice(0, nbest).map(([h]) => h);
}

/** Teacher-forced cross-attention of one pair, for the heatmap: [layer][head][T+1][S] (the
 *  same shape as Translator.cross_attention in Python: T pieces and eos). */
export async function crossAttention(model, srcIds, tokens) {
  let state = await model.encode(srcIds);
  const steps = [];
  for (const token of [BOS, ...tokens]) {
    const out = await model.step(state, [token], { attention: true });
    state = out.state;
    steps.push(out.attention); // [layer][head][S] of row 0
  }
  return steps[0].map((_, l) => steps[0][l].map((_, h) => steps.map((step) => step[l][h])));
}
