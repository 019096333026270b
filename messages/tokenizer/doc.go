// Package tokenizer is a pure-Go byte-level BPE tokenizer loaded from a
// Hugging Face tokenizer.json — the Llama-3, Qwen2/Qwen3 and gpt-oss
// families — so the router can turn completion text into the very token
// ids the engine will hash into KV blocks, without a round trip.
//
// What it does, in the reference's order (Hugging Face tokenizers):
//
//  1. Added tokens (<|im_start|>, <think>, ...) whose "normalized" is false
//     are cut out of the raw text, leftmost first and longest at one
//     position, and map to their ids.
//  2. The rest is normalized when the file says so (NFC for Qwen3;
//     NFD/NFKC/NFKD are supported too); added tokens with "normalized":
//     true are then cut out of the normalized text.
//  3. The Split pre-tokenizer's regex (behavior Isolated) cuts the text into
//     pieces; ByteLevel maps each piece's bytes to the GPT-2 alphabet.
//  4. BPE merges each piece: repeatedly the adjacent pair of lowest merge
//     rank (leftmost among equals) — or, with ignore_merges, the piece as a
//     whole when it is in the vocabulary.
//  5. A TemplateProcessing post-processor adds its special tokens (BOS)
//     when the caller asks for them.
//
// Anything else in a file (SentencePiece/Metaspace, WordPiece, byte
// fallback, other normalizers, lstrip/rstrip added tokens) is refused at
// load with the reason, never approximated: a near miss would hash to other
// blocks and silently lose every cache hit.
//
// Why not the obvious alternatives: Go's regexp cannot run these patterns
// (they need the look-ahead \s+(?!\S)), and sugarme/tokenizer panics on them
// for that reason. tiktoken-go over regexp2 matches on Llama-3 and Qwen3,
// but assumes rank = id for merges and runs the regex engine per text; here
// the merges come from the file's own merge list, and the two Split
// patterns of the Llama-3/cl100k and Qwen families are matched by a
// hand-written scanner (scanner.go) that allocates nothing and is checked
// against regexp2 on the corpus and random text (TestScannerMatchesRegex).
// Other patterns (gpt-oss's o200k) run on regexp2.
//
// Performance: the vocabulary and merges are read by a small scanner
// (jsonscan.go, 1.5-4x faster than encoding/json on them; the document is
// still validated by encoding/json), the vocabulary is re-keyed by raw
// bytes at load, the merge
// table is a flat open-addressing table, and each pooled encoder caches the
// ids of pieces it has seen (bounded: 32k pieces of ≤64 bytes), so a
// warmed-up encode allocates only its result. Figures are in bench/README.md.
//
// Tests: testdata/ holds two real tokenizer.json files (gzipped, licences in
// golden_test.go) and golden ids for a corpus of hard strings produced by an
// independent implementation (testdata/gen: Hugging Face tokenizers in
// JavaScript, run once with node; the Go tests do not need node).
package tokenizer
