// Reference tokenization: Hugging Face's tokenizers library itself (Rust,
// through the npm binding @anush008/tokenizers). argv[2]: a JSON list of
// texts; argv[3..]: tokenizer.json files. Prints {file: {"plain": ids without
// special tokens, "special": ids with them, "decoded": the plain ids decoded
// (special tokens kept)}} as JSON; a file the library refuses maps to
// {"error": its message}.
import fs from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('@anush008/tokenizers');
const texts = JSON.parse(fs.readFileSync(process.argv[2], 'utf-8'));
const out = {};
for (const file of process.argv.slice(3)) {
  try {
    const tok = Tokenizer.fromFile(file);
    const plain = [], special = [], decoded = [];
    for (const t of texts) {
      const ids = (await tok.encode(t, null, { addSpecialTokens: false })).getIds();
      plain.push(ids);
      special.push((await tok.encode(t, null, { addSpecialTokens: true })).getIds());
      decoded.push(ids.length ? await tok.decode(ids, false) : '');  // the library's Strip decoder panics on nothing
    }
    out[file] = { plain, special, decoded };
  } catch (e) {
    out[file] = { error: String(e && e.message ? e.message : e) };
  }
}
process.stdout.write(JSON.stringify(out));
