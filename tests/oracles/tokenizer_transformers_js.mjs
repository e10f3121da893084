// Reference tokenization: transformers.js (npm @huggingface/transformers)
// loads the tokenizer directory argv[2] and encodes each string of the JSON
// list in argv[3], printing {"plain": ids without special tokens,
// "special": ids with them, "decoded": the plain ids decoded} as JSON.
import fs from 'node:fs';
import path from 'node:path';
import { AutoTokenizer, env } from '@huggingface/transformers';

env.allowRemoteModels = false;
const dir = path.resolve(process.argv[2]);
env.localModelPath = path.dirname(dir) + '/';
const tokenizer = await AutoTokenizer.from_pretrained(path.basename(dir));
const texts = JSON.parse(fs.readFileSync(process.argv[3], 'utf-8'));
const plain = texts.map((t) => tokenizer.encode(t, { add_special_tokens: false }));
const special = texts.map((t) => tokenizer.encode(t));
const decoded = plain.map((ids) => (ids.length ? tokenizer.decode(ids) : ''));
process.stdout.write(JSON.stringify({ plain, special, decoded }));
