// The page's translator under Node (18+): one input line in, one translation out.
//   node translate.mjs [--beam K] [--alpha A] [--threads N] [--paragraphs] [--stats] < input.txt > output.txt
// --paragraphs splits each line into sentences as the page does (default: each line is one
// sentence, as a test set's lines are). --stats prints sentences/s and pieces/s to stderr.
// The same code as the page (translator.js and onnxruntime-web's WebAssembly), so its output and
// speed are the page's, measured without a browser.

import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { Translator } from "./translator.js";

const here = (name) => fileURLToPath(new URL(name, import.meta.url)); // here(".") ends in "/"
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const ort = await import("./ort.wasm.bundle.min.mjs");
ort.env.wasm.numThreads = Number(option("--threads", 1));
ort.env.wasm.wasmBinary = await readFile(here("ort-wasm-simd-threaded.wasm"));

const translator = await Translator.fromFolder(ort, here("."), async (path) => new Uint8Array(await readFile(path)));
const manifest = translator.manifest;
const options = { beam: Number(option("--beam", 1)), alpha: Number(option("--alpha", manifest.decoding.alpha)) };
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const text = Buffer.concat(chunks).toString("utf8");
const lines = text.split(/\r?\n/);
if (lines.length && lines[lines.length - 1] === "") lines.pop();
const start = performance.now();
let pieces = 0;
const out = [];
for (const line of lines) {
  if (args.includes("--paragraphs")) {
    const result = await translator.translate(line, options);
    out.push(result.text.replace(/\n/g, " "));
  } else {
    const result = await translator.translateSentence(line, options);
    pieces += result.tokens ? result.tokens.length + 1 : 0;
    out.push(result.text);
  }
}
const seconds = (performance.now() - start) / 1000;
process.stdout.write(out.map((l) => l + "\n").join(""));
if (args.includes("--stats")) {
  process.stderr.write(JSON.stringify({ sentences: lines.length, seconds, sentences_per_s: lines.length / seconds,
                                        pieces_per_s: pieces / seconds, threads: ort.env.wasm.numThreads,
                                        beam: options.beam, precision: manifest.precision }) + "\n");
}
