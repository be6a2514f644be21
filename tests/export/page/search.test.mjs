// search.js and segment.js on their own (no model): the rules that tests/export/test_web.py
// then checks end to end against the native engine.
import { test } from "node:test";
import assert from "node:assert/strict";
import { topK, lengthLimit, greedy, beam, EOS } from "../../../minitrans/export/page/search.js";
import { split } from "../../../minitrans/export/page/segment.js";

test("topK: the k largest, best first, ties by lower index", () => {
  assert.deepEqual(topK([1, 5, 3, 5, -Infinity, 4], 3), [1, 3, 5]);
  assert.deepEqual(topK([2, 1], 4), [0, 1]);
});

test("lengthLimit: a·n + b in float32, truncated, within 1..max_len-1", () => {
  assert.equal(lengthLimit(7, 1.5, 10, 512), 20);
  assert.equal(lengthLimit(400, 1.5, 10, 512), 511);
  assert.equal(lengthLimit(1, 0, 0, 512), 1);
});

// A model whose next-piece distribution depends only on the step: row r of step t prefers piece
// (4 + t + r) and ends at step 3. Enough to check the bookkeeping of the searches.
function fakeModel(vocab = 12) {
  return {
    vocabSize: vocab,
    encode: async () => ({ t: 0, rows: 1 }),
    step: async (state, tokens) => {
      const lp = new Float32Array(tokens.length * vocab).fill(Math.log(0.01));
      tokens.forEach((_, r) => {
        const favourite = state.t >= 3 ? EOS : 4 + state.t;
        lp[r * vocab + favourite] = Math.log(0.6);
        lp[r * vocab + (favourite === EOS ? 5 : EOS)] = Math.log(0.2);
        lp[r * vocab] = -Infinity; lp[r * vocab + 2] = -Infinity;
      });
      return { logProbs: lp, state: { t: state.t + 1, rows: tokens.length } };
    },
    reorder: (state, rows) => ({ ...state, rows: rows.length }),
  };
}

test("greedy stops at eos and at the length limit", async () => {
  const [h] = await greedy(fakeModel(), [5, 6, EOS], { maxLenA: 0, maxLenB: 10, maxLen: 64 });
  assert.deepEqual(h.tokens, [4, 5, 6]);
  const [cut] = await greedy(fakeModel(), [5, EOS], { maxLenA: 0, maxLenB: 2, maxLen: 64 });
  assert.deepEqual(cut.tokens, [4]); // the second step may only end
});

test("beam finishes an eos among the first k at once and stops at k finished (fairseq's rule)", async () => {
  // Each step's eos (p 0.2) ranks second: k = 3 hypotheses are finished after 3 steps, before the
  // likelier-per-piece [4, 5, 6] ends; sorted by log-probability / ((5 + |Y|) / 6)^α.
  const hyps = await beam(fakeModel(), [5, EOS], { beam: 3, alpha: 1, nbest: 3, maxLenA: 0, maxLenB: 10, maxLen: 64 });
  assert.deepEqual(hyps.map((h) => h.tokens), [[], [4], [4, 5]]);
  const want = [Math.log(0.2) / 1, Math.log(0.6 * 0.2) / (7 / 6), Math.log(0.6 * 0.6 * 0.2) / (8 / 6)];
  hyps.forEach((h, i) => assert.ok(Math.abs(h.score - want[i]) < 1e-5, `${h.score} vs ${want[i]}`));
  const [best] = await beam(fakeModel(), [5, EOS], { beam: 3, alpha: 1, nbest: 1, maxLenA: 0, maxLenB: 10, maxLen: 64 });
  assert.deepEqual(best.tokens, []);
});

test("split/join gives the text back and keeps line breaks as sentence ends", () => {
  const texts = ["", "  One. Two!  Three?\n\nFour", "Title\r\nA sentence. « Une citation. »", "Mr. Smith went. Yes.", "...", "a\u2028b"];
  for (const text of texts) {
    const seg = split(text, "en");
    assert.equal(seg.join(seg.sentences), text);
    for (const s of seg.sentences) assert.ok(s && s === s.trim() && !/[\r\n\u2028]/.test(s), JSON.stringify(s));
  }
  assert.deepEqual(split("One. Two!\nThree", "en").sentences, ["One.", "Two!", "Three"]);
});

test("split: abbreviations and initials do not end a sentence; closing quotes stay with theirs", () => {
  const en = split("Mr. Smith met J. K. Rowling. They talked.", "en", ["Mr", "Dr"]);
  assert.deepEqual(en.sentences, ["Mr. Smith met J. K. Rowling.", "They talked."]);
  assert.deepEqual(split("Mr. Smith left.", "en").sentences, ["Mr.", "Smith left."]); // no list: ICU's cut
  const fr = split("« Merci. » « Avec plaisir. » Tom me tuera.", "fr", ["Mme"]);
  assert.deepEqual(fr.sentences, ["« Merci. »", "« Avec plaisir. »", "Tom me tuera."]);
});
