// tokenizer-oracle-rust.mjs — the second reference the data/bpe test compares against: Hugging
// Face's own Rust `tokenizers` library, through its Node binding (npm `tokenizers`, whose package
// ships the prebuilt native modules), run on a real tokenizer.json. Where it and transformers.js
// disagree, this one is the reference: it is the library transformers itself runs.
//
//   node scripts/tokenizer-oracle-rust.mjs LIB_DIR TOKENIZER_DIR [--no-special] [--pretokens] < texts.jsonl > ids.jsonl
//
// LIB_DIR is the unpacked `tokenizers` package (holding index.js and the .node modules);
// TOKENIZER_DIR holds tokenizer.json (as scripts/fetch-tokenizers.sh unpacks them).
// Input: one JSON string per line. Output, one line per input line, in the format of
// tokenizer-oracle.mjs:
//   {"with": ids with special tokens, "without": ids without, "decoded": decode(without)}
// decoded keeps special tokens (the Rust decoder applies no clean-up of tokenization spaces).
// A line that is a JSON array of ids instead of a string is decoded only: {"decoded": decode(ids)}.
// With --no-special "with" is left out (the texts are encoded once). With --pretokens each line
// also has "pretokens": the pre-tokenizer's pieces of the normalized
// text (the whole normalized text when the file has no pre-tokenizer); added tokens are not split
// out first, so it is meant for texts without them.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const flags = new Set(["--no-special", "--pretokens"]);
const args = process.argv.slice(2);
const noSpecial = args.includes("--no-special");
const pretokens = args.includes("--pretokens");
const [libDir, tokDir, ...rest] = args.filter((a) => !flags.has(a));
if (!libDir || !tokDir || rest.length > 0) {
  console.error("usage: node tokenizer-oracle-rust.mjs LIB_DIR TOKENIZER_DIR [--no-special] [--pretokens] < texts.jsonl");
  process.exit(2);
}
const require = createRequire(import.meta.url);
const { Tokenizer } = require(path.resolve(libDir, "index.js"));
const tokenizer = Tokenizer.fromFile(path.join(tokDir, "tokenizer.json"));
const normalizer = tokenizer.getNormalizer();
const preTokenizer = tokenizer.getPreTokenizer();

const lines = fs
  .readFileSync(0, "utf8")
  .split("\n")
  .filter((line) => line !== "")
  .map((line) => JSON.parse(line));
const batch = 256;

// encode returns the output lines of texts.
async function encode(texts) {
  const out = [];
  for (let i = 0; i < texts.length; i += batch) {
    const chunk = texts.slice(i, i + batch);
    const withSpecial = noSpecial ? null : await tokenizer.encodeBatch(chunk, { addSpecialTokens: true });
    const without = await tokenizer.encodeBatch(chunk, { addSpecialTokens: false });
    const ids = without.map((e) => e.getIds());
    const decoded = await tokenizer.decodeBatch(ids, false);
    chunk.forEach((text, j) => {
      const line = { without: ids[j], decoded: decoded[j] };
      if (withSpecial) line.with = withSpecial[j].getIds();
      if (pretokens) {
        const norm = normalizer ? normalizer.normalizeString(text) : text;
        line.pretokens = preTokenizer ? preTokenizer.preTokenizeString(norm).map((p) => p[0]) : [norm];
      }
      out.push(JSON.stringify(line));
    });
  }
  return out;
}

// decode returns the output lines of id lists.
async function decode(idLists) {
  const out = [];
  for (let i = 0; i < idLists.length; i += batch) {
    for (const decoded of await tokenizer.decodeBatch(idLists.slice(i, i + batch), false)) {
      out.push(JSON.stringify({ decoded }));
    }
  }
  return out;
}

const decoding = lines.some(Array.isArray);
if (decoding && !lines.every(Array.isArray)) {
  console.error("tokenizer-oracle-rust.mjs: the input mixes texts and id lists");
  process.exit(2);
}
const out = decoding ? await decode(lines) : await encode(lines);
fs.writeFileSync(1, out.length > 0 ? out.join("\n") + "\n" : "");
