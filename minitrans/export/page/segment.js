// Sentences of a text and the text around them, for the page (minitrans/text/segment.py's contract,
// with the browser's own sentence splitter, Intl.Segmenter, in place of pysbd):
//   text = gaps[0] + sentences[0] + gaps[1] + ... + sentences[n-1] + gaps[n]
// * line breaks always end a sentence (a title line has no full stop);
// * a piece with no letter or digit (a closing quote cut off), or the closing quotes and brackets
//   a piece starts with, join the sentence before it;
// * a piece that ends in an abbreviation of the language ("Mr.", "Mme.": the list of
//   minitrans/export/sentence_onnx.py, given by the manifest) or an initial ("J.") joins the next one:
//   ICU's sentence rules have no abbreviation list (its "ss" suppressions are not reachable
//   through Intl.Segmenter);
// * sentences have no surrounding whitespace; gaps keep spaces, tabs and line breaks as they were.
// docs/export.md#sentences measures Intl.Segmenter's boundaries against pysbd's.

const LINE_BREAK = /(\r\n|\n|\r|\u2028|\u2029)/;
const WORDY = /[\p{L}\p{N}]/u;
const CLOSERS = /^[»”’)\]]+/u;
const segmenters = new Map();

function segmenter(lang) {
  if (!segmenters.has(lang)) segmenters.set(lang, new Intl.Segmenter(lang, { granularity: "sentence" }));
  return segmenters.get(lang);
}

export class Segmented {
  constructor(sentences, gaps) { this.sentences = sentences; this.gaps = gaps; }

  /** The text with each sentence replaced by its translation. With `tidy` the layout of a
   *  translation (minitrans's Translator): no outer whitespace, a gap holding line breaks
   *  becomes just those line breaks (\r\n counts one), other gaps stay as they were. */
  join(translations, tidy = false) {
    if (translations.length !== this.sentences.length) throw new Error(`${translations.length} translations for ${this.sentences.length} sentences`);
    const gaps = tidy ? ["", ...this.gaps.slice(1, -1).map(oneLineGap), ""] : this.gaps;
    return gaps[0] + translations.map((t, i) => t + gaps[i + 1]).join("");
  }
}

function oneLineGap(gap) {
  const breaks = gap.split(/\r\n|\n|\r|\u2028|\u2029/).length - 1;
  return breaks ? "\n".repeat(breaks) : gap;
}

/** Whether `text` ends in one of `abbreviations` or a single capital, then a full stop. */
function endsInAbbreviation(text, abbreviations) {
  const word = /(?:^|[\s(«"'“])([\p{L}]+)\.$/u.exec(text)?.[1];
  return word !== undefined && ((word.length === 1 && word === word.toUpperCase()) || abbreviations.includes(word));
}

/** Sentence ranges [start, end) of one line (no line break in it). */
function lineSentences(line, lang, abbreviations) {
  const ranges = [];
  let joinNext = false;
  for (const { segment, index } of segmenter(lang).segment(line)) {
    const lead = segment.length - segment.trimStart().length;
    let core = segment.trim(), start = index + lead;
    const closer = ranges.length ? CLOSERS.exec(core)?.[0] : undefined;
    if (closer) { // French "Oui. » Bien.": ICU starts the next sentence at the closing quote
      ranges[ranges.length - 1][1] = start + closer.length;
      const rest = core.slice(closer.length);
      start += core.length - rest.trimStart().length;
      core = rest.trim();
      if (!core) continue;
    }
    const end = start + core.length;
    if ((joinNext || !WORDY.test(core)) && ranges.length) ranges[ranges.length - 1][1] = end; // joins the one before
    else ranges.push([start, end]);
    joinNext = endsInAbbreviation(core, abbreviations);
  }
  return ranges;
}

/** A text's sentences and the gaps around them; split(t).join(split(t).sentences) === t.
 *  `abbreviations`: words that end in a full stop without ending a sentence ("Mr", "Mme"). */
export function split(text, lang = "en", abbreviations = []) {
  const sentences = [], gaps = [];
  let gap = "";
  text.split(LINE_BREAK).forEach((part, i) => {
    if (i % 2) { gap += part; return; } // a line break
    let at = 0;
    for (const [start, end] of lineSentences(part, lang, abbreviations)) {
      gaps.push(gap + part.slice(at, start));
      sentences.push(part.slice(start, end));
      gap = "";
      at = end;
    }
    gap += part.slice(at);
  });
  gaps.push(gap);
  return new Segmented(sentences, gaps);
}
