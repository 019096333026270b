#!/usr/bin/env bash
# Local tokenization, Go against the JavaScript reference, in one run on
# the same text (bench/testdata/tokenize.txt, encoded line by line), one
# core each: GOMAXPROCS=1 for Go, node's main thread for JavaScript.
# Usage: bench/tokenizejs/compare.sh [seconds per side, default 5]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
secs=${1:-5}
gen="$root/messages/tokenizer/testdata/gen"
[ -d "$gen/node_modules" ] || (cd "$gen" && npm ci --no-audit --no-fund >/dev/null)
go_out=$(cd "$root" && GOMAXPROCS=1 go test -run '^$' -bench '^BenchmarkTokenize$' -benchtime "${secs}s" ./bench/)
js_out=$(node "$here/bench.mjs" "$secs")
echo "$go_out" | grep '^BenchmarkTokenize'
echo "$js_out"
for name in qwen3 gptoss; do
  go_mb=$(echo "$go_out" | awk -v n="BenchmarkTokenize/$name" '$1==n {for (i=1;i<=NF;i++) if ($(i+1)=="MB/s") print $i}')
  go_tok=$(echo "$go_out" | awk -v n="BenchmarkTokenize/$name" '$1==n {for (i=1;i<=NF;i++) if ($(i+1)=="tokens/s") print $i}')
  js_mb=$(echo "$js_out" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const l of s.trim().split("\n")){const o=JSON.parse(l);if(o.tokenizer===process.argv[1])console.log(o.mb_per_s)}})' "$name")
  echo "$name: Go $go_mb MB/s, $go_tok tokens/s; JavaScript $js_mb MB/s; Go/JavaScript $(awk -v a="$go_mb" -v b="$js_mb" 'BEGIN{printf "%.1f", a/b}')x"
done
