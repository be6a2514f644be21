// The translator of the exported page: onnxruntime-web runs the two graphs (encoder.onnx,
// decoder.onnx: minitrans/export/onnx_graphs.py), tokenizer.js tokenises, search.js searches,
// segment.js splits paragraphs into sentences and puts them back. The same module runs in the
// page and under Node (tests, bench): it is given the `ort` module and a way to read files.

import { Tokenizer, cleanText, cleanOutput, hasWords } from "./tokenizer.js";
import { greedy, beam as beamSearch, crossAttention, EOS } from "./search.js";
import { split } from "./segment.js";

/** The decoder graph behind search.js's model interface: states hold onnxruntime tensors. */
export class OnnxModel {
  constructor(ort, encoder, decoder, config) {
    this.ort = ort;
    this.encoder = encoder;
    this.decoder = decoder;
    this.vocabSize = config.vocab_size;
    this.layers = config.n_decoder_layers;
    this.heads = config.n_heads;
    this.headDim = config.d_model / config.n_heads;
  }

  async encode(srcIds) {
    const src = new this.ort.Tensor("int64", BigInt64Array.from(srcIds, BigInt), [1, srcIds.length]);
    const out = await this.encoder.run({ src });
    const empty = () => new this.ort.Tensor("float32", new Float32Array(0), [this.layers, 1, this.heads, 0, this.headDim]);
    return { src, crossKeys: out.cross_keys, crossValues: out.cross_values, selfKeys: empty(), selfValues: empty(), rows: 1 };
  }

  async step(state, tokens, { attention = false } = {}) {
    const feeds = {
      tokens: new this.ort.Tensor("int64", BigInt64Array.from(tokens, BigInt), [tokens.length, 1]),
      src: state.src, cross_keys: state.crossKeys, cross_values: state.crossValues,
      self_keys: state.selfKeys, self_values: state.selfValues,
    };
    const fetches = ["log_probs", "self_keys_out", "self_values_out", ...(attention ? ["attention"] : [])];
    const out = await this.decoder.run(feeds, fetches);
    const next = { ...state, selfKeys: out.self_keys_out, selfValues: out.self_values_out };
    const result = { logProbs: out.log_probs.data, state: next };
    if (attention) { // (N, L, H, S) -> [layer][head][S] of row 0
      const [, layers, heads, s] = out.attention.dims, w = out.attention.data;
      result.attention = Array.from({ length: layers }, (_, l) =>
        Array.from({ length: heads }, (_, h) => Array.from(w.subarray((l * heads + h) * s, (l * heads + h + 1) * s))));
    }
    return result;
  }

  /** The state with rows gathered along the row axis (axis 1 of the (L, N, ...) tensors, 0 of src). */
  reorder(state, rows) {
    const gather = (tensor, axis) => {
      const dims = tensor.dims, n = dims[axis];
      const outer = dims.slice(0, axis).reduce((a, b) => a * b, 1);
      const inner = dims.slice(axis + 1).reduce((a, b) => a * b, 1);
      const data = tensor.data, out = new data.constructor(outer * rows.length * inner);
      for (let o = 0; o < outer; o++) {
        rows.forEach((r, i) => out.set(data.subarray((o * n + r) * inner, (o * n + r + 1) * inner), (o * rows.length + i) * inner));
      }
      const shape = dims.slice();
      shape[axis] = rows.length;
      return new this.ort.Tensor(tensor.type, out, shape);
    };
    return {
      src: gather(state.src, 0), crossKeys: gather(state.crossKeys, 1), crossValues: gather(state.crossValues, 1),
      selfKeys: gather(state.selfKeys, 1), selfValues: gather(state.selfValues, 1), rows: rows.length,
    };
  }
}

/** Create an onnxruntime-web session from a model file's bytes. */
export async function session(ort, bytes) {
  return ort.InferenceSession.create(bytes, { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
}

export class Translator {
  /** @param files {manifest, tokenizer (parsed JSON), encoder, decoder (ArrayBuffer/Uint8Array)} */
  static async create(ort, { manifest, tokenizer, encoder, decoder }) {
    const [enc, dec] = await Promise.all([session(ort, encoder), session(ort, decoder)]);
    return new Translator(manifest, new Tokenizer(tokenizer), new OnnxModel(ort, enc, dec, manifest.model_config));
  }

  /** A translator from the exported folder at `base` (a URL ending in "/"), its files read by
   *  `read(url) -> Uint8Array` (default: fetch). */
  static async fromFolder(ort, base, read = null) {
    read ??= async (url) => new Uint8Array(await (await fetch(url)).arrayBuffer());
    const json = async (name) => JSON.parse(new TextDecoder().decode(await read(base + name)));
    const [manifest, tokenizer, encoder, decoder] = await Promise.all([
      json("manifest.json"), json("tokenizer.json"), read(base + "encoder.onnx"), read(base + "decoder.onnx")]);
    return Translator.create(ort, { manifest, tokenizer, encoder, decoder });
  }

  constructor(manifest, tokenizer, model) {
    this.manifest = manifest;
    this.tokenizer = tokenizer;
    this.model = model;
    const decoding = manifest.decoding;
    this.limits = { maxLenA: decoding.max_len_a, maxLenB: decoding.max_len_b, maxLen: manifest.model_config.max_len };
    this.source = manifest.direction.source;
    this.abbreviations = manifest.segmentation?.abbreviations ?? [];
  }

  /** Source ids of one cleaned sentence as the model reads them: truncated to max_len-1, then eos. */
  sourceIds(cleaned) {
    const ids = this.tokenizer.encode(cleaned);
    const limit = this.limits.maxLen - 1;
    return { ids: [...ids.slice(0, limit), EOS], truncated: ids.length > limit };
  }

  /** One sentence -> {source, text, nbest: [{text, score}], srcIds, tokens, truncated}. */
  async translateSentence(sentence, { beam = 1, alpha = 1.0, nbest = 1 } = {}) {
    const cleaned = cleanText(sentence);
    if (!hasWords(cleaned)) return { source: sentence, text: cleaned, nbest: [{ text: cleaned, score: 0 }], srcIds: null };
    const { ids, truncated } = this.sourceIds(cleaned);
    const hyps = beam > 1 ? await beamSearch(this.model, ids, { beam, alpha, nbest, ...this.limits })
                          : await greedy(this.model, ids, this.limits);
    const texts = hyps.map((h) => cleanOutput(this.tokenizer.decode(h.tokens)));
    return { source: sentence, text: texts[0], score: hyps[0].score, truncated, srcIds: ids, tokens: hyps[0].tokens,
             nbest: hyps.map((h, i) => ({ text: texts[i], score: h.score })) };
  }

  /** A text (paragraphs, several sentences) -> {text, sentences}: each sentence translated, the
   *  layout kept (line breaks as they were, the spaces between sentences as they were). */
  async translate(text, options = {}, progress = null) {
    const seg = split(text.trim(), this.source, this.abbreviations);
    const sentences = [];
    for (const s of seg.sentences) {
      sentences.push(await this.translateSentence(s, options));
      progress?.(sentences.length, seg.sentences.length);
    }
    return { text: seg.join(sentences.map((s) => s.text), true), sentences };
  }

  /** Cross-attention of a translated sentence: {src: pieces, tgt: pieces, weights [layer][head][T+1][S]}. */
  async attention(sentence) {
    const weights = await crossAttention(this.model, sentence.srcIds, sentence.tokens);
    const tok = this.tokenizer;
    return { src: [...tok.piecesOf(sentence.srcIds.slice(0, -1)), "</s>"], tgt: [...tok.piecesOf(sentence.tokens), "</s>"],
             weights };
  }
}
