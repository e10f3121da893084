// The reference side of scripts/bench_tokenizer.sh: Hugging Face's tokenizers
// library (Rust, npm @anush008/tokenizers) encodes the same file line by line
// on one thread (TOKENIZERS_PARALLELISM=false). Prints the same line as
// zoo_bench_tokenizer.
import fs from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(process.cwd() + '/');
const { Tokenizer } = require('@anush008/tokenizers');
const lines = fs.readFileSync(process.argv[3], 'utf-8').split('\n');
if (lines.length && lines[lines.length - 1] === '') lines.pop();
const bytes = lines.reduce((n, l) => n + Buffer.byteLength(l), 0);
const t0 = performance.now();
const tok = Tokenizer.fromFile(process.argv[2] + '/tokenizer.json');
const t1 = performance.now();
let tokens = 0;
for (let i = 0; i < lines.length; i += 1024) {
  const batch = await tok.encodeBatch(lines.slice(i, i + 1024), { addSpecialTokens: false });
  for (const e of batch) tokens += e.getIds().length;
}
const seconds = (performance.now() - t1) / 1000;
console.log(`${(bytes / 1e6 / seconds).toFixed(2)} MB/s ${tokens} tokens ${seconds.toFixed(2)} s ${((t1 - t0) / 1000).toFixed(2)} load`);
