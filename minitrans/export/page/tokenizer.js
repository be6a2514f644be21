// SentencePiece in JavaScript, for the one configuration minitrans trains (minitrans/text/tokenizer.py):
// a unigram model, identity normalisation, byte fallback, the default whitespace handling
// (a dummy ▁ prefix, runs of spaces collapsed, leading and trailing spaces dropped). It reads
// tokenizer.json, written by `minitrans export --format web` from the model's own SentencePiece
// model (pieces, scores, types), and gives the pieces and the text that Python's SentencePiece
// gives: tests/export/test_web.py holds it to that on 10,000+ lines under `node --test`.
//
// Also here: cleanText, the same cleaning minitrans/text/cleaning.py applies before tokenising
// (format characters out, NFC, whitespace runs to one space), and hasWords.

export const SPACE = "\u2581";
const NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6;
const UNK_PENALTY = 10; // SentencePiece's kUnkPenalty: an unknown character scores min_score - 10
const utf8 = new TextEncoder();

// Python's str.split() whitespace: the characters str.isspace() accepts (not JS's \s: that has
// U+FEFF and lacks U+001C..U+001F and U+0085).
const WHITESPACE = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/gu;
const FORMAT = /\p{Cf}/gu;

/** cleaning.py's clean(without_format_characters(text)): what every minitrans path translates. */
export function cleanText(text) {
  text = text.toWellFormed().replace(FORMAT, (c) => (c < "\xad" ? c : ""));
  return text.normalize("NFC").replace(WHITESPACE, " ").replace(/^ | $/g, "");
}

/** cleaning.py's clean(): NFC, whitespace runs to one space, stripped (what outputs get). */
export function cleanOutput(text) {
  return text.normalize("NFC").replace(WHITESPACE, " ").replace(/^ | $/g, "");
}

/** Whether text holds a letter or a digit (cleaning.has_words): else it is given back as it is. */
export function hasWords(text) {
  return /[\p{L}\p{N}]/u.test(text);
}

export class Tokenizer {
  /** @param spec the parsed tokenizer.json: {pieces: [[piece, score, type], ...], normalizer: {...}} */
  constructor(spec) {
    const n = spec.pieces.length;
    this.pieces = spec.pieces.map((p) => p[0]);
    this.types = Int8Array.from(spec.pieces, (p) => p[2]);
    this.scores = Float32Array.from(spec.pieces, (p) => p[1]);
    this.normalizer = spec.normalizer;
    this.unkSurface = spec.unk_surface;
    this.index = new Map();
    this.byteIds = new Int32Array(256).fill(-1);
    this.maxChars = 1;
    let min = Infinity, max = -Infinity;
    for (let id = 0; id < n; id++) {
      const type = this.types[id], piece = this.pieces[id];
      if (type === NORMAL || type === USER_DEFINED || type === UNUSED) {
        this.index.set(piece, id);
        this.maxChars = Math.max(this.maxChars, [...piece].length);
      }
      if (type === NORMAL) {
        min = Math.min(min, this.scores[id]);
        max = Math.max(max, this.scores[id]);
      }
      if (type === BYTE) this.byteIds[parseInt(piece.slice(3, 5), 16)] = id;
      if (type === UNKNOWN) this.unkId = id;
    }
    this.unkScore = Math.fround(min - UNK_PENALTY);
    this.maxScore = max;
    this.size = n;
  }

  /** SentencePiece's normaliser for an identity rule: spaces only (U+0020) are touched. */
  normalize(text) {
    const { add_dummy_prefix: dummy, remove_extra_whitespaces: tidy, escape_whitespaces: escape } = this.normalizer;
    if (tidy) text = text.replace(/ +/g, " ").replace(/^ /, "").replace(/ $/, "");
    if (!text) return "";
    if (dummy) text = " " + text;
    return escape ? text.replaceAll(" ", SPACE) : text;
  }

  /** Text -> piece ids (no bos/eos), the best segmentation by SentencePiece's Viterbi search. */
  encode(text) {
    const chars = Array.from(this.normalize(text));
    const n = chars.length;
    // best[e]: the best score of a segmentation of chars[0..e), from[e] its last piece's start.
    const best = new Float64Array(n + 1), from = new Int32Array(n + 1).fill(-1), ids = new Int32Array(n + 1);
    for (let start = 0; start < n; start++) {
      const here = best[start];
      let single = false, piece = "";
      for (let len = 1; len <= this.maxChars && start + len <= n; len++) {
        piece += chars[start + len - 1];
        const id = this.index.get(piece);
        if (id === undefined || this.types[id] === UNUSED) continue;
        const score = this.types[id] === USER_DEFINED
          ? Math.fround(utf8.encode(piece).length * this.maxScore - 0.1) : this.scores[id];
        this.#offer(best, from, ids, start, start + len, Math.fround(score + here), id);
        if (len === 1) single = true;
      }
      if (!single) this.#offer(best, from, ids, start, start + 1, Math.fround(this.unkScore + here), this.unkId);
    }
    const out = [];
    for (let end = n; end > 0; end = from[end]) {
      const id = ids[end];
      if (id === this.unkId) { // byte fallback: the character's UTF-8 bytes, last pushed first
        const bytes = utf8.encode(chars.slice(from[end], end).join(""));
        for (let b = bytes.length - 1; b >= 0; b--) out.push(this.byteIds[bytes[b]]);
      } else out.push(id);
    }
    return out.reverse();
  }

  #offer(best, from, ids, start, end, score, id) {
    if (from[end] === -1 || score > best[end]) { // the first best wins ties, as in SentencePiece
      best[end] = score; from[end] = start; ids[end] = id;
    }
  }

  /** Piece ids -> text, as SentencePiece's DecodeIds (control pieces vanish; bytes are UTF-8). */
  decode(ids) {
    let text = "", bytes = [], bosSpace = true;
    const flush = () => { text += decodeBytes(bytes); bytes = []; };
    for (const id of ids) {
      const type = this.types[id];
      if (type === BYTE) { bytes.push(parseInt(this.pieces[id].slice(3, 5), 16)); continue; }
      flush();
      if (text) bosSpace = false;
      if (type === CONTROL) continue;
      let piece = type === UNKNOWN ? this.unkSurface : this.pieces[id];
      const { add_dummy_prefix: dummy, remove_extra_whitespaces: tidy } = this.normalizer;
      if (type !== UNKNOWN && bosSpace && (dummy || tidy) && piece.startsWith(SPACE)) piece = piece.slice(SPACE.length);
      text += piece.replaceAll(SPACE, " ");
    }
    flush();
    return text;
  }

  /** Readable pieces (▁ marks a word start), for the attention heatmap. */
  piecesOf(ids) { return ids.map((id) => this.pieces[id]); }
}

/** UTF-8 bytes -> text, each structurally invalid byte one U+FFFD (SentencePiece's rule, not
 *  TextDecoder's, which gives one U+FFFD per maximal invalid subsequence). */
export function decodeBytes(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i], rest = bytes.length - i;
    const trail = (k) => (bytes[i + k] & 0xc0) === 0x80;
    let cp = -1, len = 1;
    if (b < 0x80) cp = b;
    else if (rest >= 2 && (b & 0xe0) === 0xc0 && trail(1)) { cp = ((b & 0x1f) << 6) | (bytes[i + 1] & 0x3f); len = 2; if (cp < 0x80) cp = -1; }
    else if (rest >= 3 && (b & 0xf0) === 0xe0 && trail(1) && trail(2)) {
      cp = ((b & 0x0f) << 12) | ((bytes[i + 1] & 0x3f) << 6) | (bytes[i + 2] & 0x3f); len = 3; if (cp < 0x800) cp = -1;
    } else if (rest >= 4 && (b & 0xf8) === 0xf0 && trail(1) && trail(2) && trail(3)) {
      cp = ((b & 0x07) << 18) | ((bytes[i + 1] & 0x3f) << 12) | ((bytes[i + 2] & 0x3f) << 6) | (bytes[i + 3] & 0x3f);
      len = 4; if (cp < 0x10000) cp = -1;
    }
    if (cp < 0 || (cp >= 0xd800 && cp < 0xe000) || cp > 0x10ffff) { out += "\ufffd"; i += 1; }
    else { out += String.fromCodePoint(cp); i += len; }
  }
  return out;
}
