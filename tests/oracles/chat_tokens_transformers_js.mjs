// Reference chat samples: transformers.js (npm @huggingface/transformers)
// loads the tokenizer directory argv[2] (its chat_template included) and, for
// each conversation of the JSON list in argv[3], renders it with
// apply_chat_template, tokenizes it without adding special tokens, and marks
// assistant turn i: the text added between rendering messages[:i] with the
// generation prompt and messages[:i+1], its token span found as the longest
// common token prefix of each rendering with the whole. Prints a JSON list
// of {ids, in_loss}.
import fs from 'node:fs';
import path from 'node:path';
import { AutoTokenizer, env } from '@huggingface/transformers';

env.allowRemoteModels = false;
const dir = path.resolve(process.argv[2]);
env.localModelPath = path.dirname(dir) + '/';
const tokenizer = await AutoTokenizer.from_pretrained(path.basename(dir));
const conversations = JSON.parse(fs.readFileSync(process.argv[3], 'utf-8'));

const render = (messages, add_generation_prompt) =>
  tokenizer.apply_chat_template(messages, { tokenize: false, add_generation_prompt });
const encode = (text) => tokenizer.encode(text, { add_special_tokens: false });
const commonPrefix = (a, b) => {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) ++n;
  return n;
};

const out = conversations.map((messages) => {
  const whole = render(messages, false);
  const ids = encode(whole);
  const in_loss = ids.map(() => 0);
  messages.forEach((m, i) => {
    if (m.role !== 'assistant') return;
    const prompt = render(messages.slice(0, i), true);
    const turn = render(messages.slice(0, i + 1), false);
    const from = commonPrefix(encode(prompt), ids);
    const to = turn.length >= whole.length ? ids.length : commonPrefix(encode(turn), ids);
    for (let t = from; t < to; ++t) in_loss[t] = 1;
  });
  return { ids, in_loss };
});
process.stdout.write(JSON.stringify(out));
