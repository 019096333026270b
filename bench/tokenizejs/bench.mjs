// The JavaScript reference's side of the tokenizer benchmark: Hugging Face
// tokenizers in JavaScript encoding bench/testdata/tokenize.txt, one core
// (node runs the encode on its one main thread). Prints one JSON line per
// tokenizer: MB/s of text and tokens/s. Run by compare.sh beside the Go
// benchmark; needs `npm ci` in messages/tokenizer/testdata/gen once.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { fixtures, load } from "../../messages/tokenizer/testdata/gen/golden.mjs";

const here = fileURLToPath(new URL(".", import.meta.url));
const text = readFileSync(`${here}../testdata/tokenize.txt`, "utf8");
const lines = text.split("\n").map((l) => l + "\n");
const bytes = Buffer.byteLength(text, "utf8");
const seconds = Number(process.argv[2] || 5);

for (const [name, pkg] of Object.entries(fixtures)) {
  const { tokenizer } = load(pkg);
  const encodeAll = () => {
    let n = 0;
    for (const l of lines) n += tokenizer.encode(l, { add_special_tokens: false }).ids.length;
    return n;
  };
  encodeAll(); // warm-up: JIT and the BPE cache, as the Go side warms up
  let passes = 0, tokens = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < seconds) {
    tokens += encodeAll();
    passes++;
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  }
  console.log(JSON.stringify({ impl: "js", tokenizer: name, mb_per_s: (passes * bytes) / 1e6 / elapsed, tokens_per_s: tokens / elapsed, passes }));
}
