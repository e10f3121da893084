// OpenAI's own JavaScript client (npm `openai`) driving zoo serve, as an
// application would: node serve_openai_client.mjs BASE_URL PROMPT STOP.
// Prints one JSON object with what each call returned.
import OpenAI from "openai";

const [baseURL, prompt, stop] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const model = (await client.models.list()).data[0].id;
const out = { model };

// ignore_eos is vLLM's extension; the client passes unknown fields through.
const greedy = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, ignore_eos: true });
out.completion = greedy.choices[0].text;
out.completion_finish = greedy.choices[0].finish_reason;
out.completion_tokens = greedy.usage.completion_tokens;

const sampled = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0.9, seed: 5, ignore_eos: true });
out.sampled = sampled.choices[0].text;

const chat = await client.chat.completions.create({
  model, messages: [{ role: "user", content: prompt }], max_tokens: 10, temperature: 0 });
out.chat = chat.choices[0].message.content;
out.chat_role = chat.choices[0].message.role;

out.stream = "";
for await (const chunk of await client.completions.create({
  model, prompt, max_tokens: 12, temperature: 0, ignore_eos: true, stream: true }))
  out.stream += chunk.choices[0]?.text ?? "";

out.chat_stream = "";
for await (const chunk of await client.chat.completions.create({
  model, messages: [{ role: "user", content: prompt }], max_tokens: 10, temperature: 0, stream: true }))
  out.chat_stream += chunk.choices[0]?.delta?.content ?? "";

const n = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 1, n: 3, seed: 4 });
out.n = n.choices.map((c) => c.text);

const stopped = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, ignore_eos: true, stop: [stop] });
out.stopped = stopped.choices[0].text;
out.stopped_finish = stopped.choices[0].finish_reason;

try {
  await client.completions.create({ model, prompt, max_tokens: "many" });
  out.bad_request = "accepted";
} catch (e) {
  out.bad_request = `${e.status} ${e.error?.param ?? ""}`;  // the client's APIError carries the server's JSON error
}
console.log(JSON.stringify(out));
