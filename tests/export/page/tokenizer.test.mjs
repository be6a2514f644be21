// tokenizer.js against Python's SentencePiece and minitrans/text/cleaning.py, on cases written by
// tests/export/test_web.py (WEB_CASES: a JSON file with the lines and Python's answers).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Tokenizer, cleanText, hasWords } from "../../../minitrans/export/page/tokenizer.js";

const cases = JSON.parse(readFileSync(process.env.WEB_CASES, "utf8"));
const tokenizer = new Tokenizer(JSON.parse(readFileSync(cases.tokenizer, "utf8")));

function mismatches(items, actual, expected) {
  const bad = [];
  items.forEach((item, i) => {
    if (JSON.stringify(actual(item, i)) !== JSON.stringify(expected[i])) bad.push({ item, got: actual(item, i), want: expected[i] });
  });
  return bad;
}

test(`cleaning equals cleaning.py on ${cases.lines.length} lines`, () => {
  const bad = mismatches(cases.lines, (line) => cleanText(line), cases.cleaned);
  assert.deepEqual(bad.slice(0, 5), []);
  assert.deepEqual(cases.lines.map((l) => hasWords(cleanText(l))), cases.has_words);
});

test(`pieces equal SentencePiece's on ${cases.lines.length} lines`, () => {
  const bad = mismatches(cases.cleaned, (text) => tokenizer.encode(text), cases.ids);
  assert.deepEqual(bad.slice(0, 5), [], `${bad.length} of ${cases.cleaned.length} lines differ`);
});

test("decoding equals SentencePiece's, for the lines and for random id sequences", () => {
  const bad = mismatches(cases.ids, (ids) => tokenizer.decode(ids), cases.decoded);
  assert.deepEqual(bad.slice(0, 5), []);
  const random = mismatches(cases.random_ids, (ids) => tokenizer.decode(ids), cases.random_decoded);
  assert.deepEqual(random.slice(0, 5), [], `${random.length} of ${cases.random_ids.length} random sequences differ`);
});
