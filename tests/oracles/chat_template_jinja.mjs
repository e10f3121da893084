// Reference chat-template rendering: npm @huggingface/jinja (the Jinja
// engine of transformers.js) renders each case of the JSON list in argv[2]
// ({template, bos_token, eos_token, messages, add_generation_prompt}) and
// prints a JSON list of {text} or {error} (raise_exception is the engine's own).
import fs from 'node:fs';
import { Template } from '@huggingface/jinja';

const cases = JSON.parse(fs.readFileSync(process.argv[2], 'utf-8'));
const out = cases.map((c) => {
  try {
    const template = new Template(c.template);
    const text = template.render({
      messages: c.messages,
      add_generation_prompt: c.add_generation_prompt,
      bos_token: c.bos_token,
      eos_token: c.eos_token,
    });
    return { text };
  } catch (e) {
    return { error: String(e.message) };
  }
});
process.stdout.write(JSON.stringify(out));
