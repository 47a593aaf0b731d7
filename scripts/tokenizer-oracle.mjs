// tokenizer-oracle.mjs — one of the two references the data/bpe test compares against:
// transformers.js's tokenizer code (the dependency-free @lenml/tokenizers bundle) run on a real
// tokenizer.json. The other, tokenizer-oracle-rust.mjs, runs Hugging Face's Rust library, which is
// the reference where they differ.
//
//   node scripts/tokenizer-oracle.mjs LIB_DIR TOKENIZER_DIR < texts.jsonl > ids.jsonl
//
// LIB_DIR is the unpacked @lenml/tokenizers package (holding dist/main.mjs); TOKENIZER_DIR holds
// tokenizer.json and tokenizer_config.json (both as scripts/fetch-tokenizers.sh unpacks them).
// Input: one JSON string per line. Output, one line per input line:
//   {"with": ids with special tokens, "without": ids without, "decoded": decode(without)}
// decoded uses clean_up_tokenization_spaces: false and keeps special tokens.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [libDir, tokDir] = process.argv.slice(2);
if (!libDir || !tokDir) {
  console.error("usage: node tokenizer-oracle.mjs LIB_DIR TOKENIZER_DIR < texts.jsonl");
  process.exit(2);
}
const lib = await import(pathToFileURL(path.join(libDir, "dist", "main.mjs")).href);
const readJSON = (name) => JSON.parse(fs.readFileSync(path.join(tokDir, name), "utf8"));
const tokenizer = lib.TokenizerLoader.fromPreTrained({
  tokenizerJSON: readJSON("tokenizer.json"),
  tokenizerConfig: readJSON("tokenizer_config.json"),
});

const input = fs.readFileSync(0, "utf8").split("\n");
const out = [];
for (const line of input) {
  if (line === "") continue;
  const text = JSON.parse(line);
  const withSpecial = tokenizer.encode(text, { add_special_tokens: true });
  const without = tokenizer.encode(text, { add_special_tokens: false });
  const decoded = without.length > 0
    ? tokenizer.decode(without, { clean_up_tokenization_spaces: false })
    : "";
  out.push(JSON.stringify({ with: withSpecial, without, decoded }));
}
fs.writeFileSync(1, out.join("\n") + "\n");
