// Drives ssm serve with the official openai npm client: a completion, a
// streamed completion and a chat completion, greedy. Prints one JSON line
// with what it got, for tests/serve/openai_client_test.cpp to check.
// usage: node openai_client.mjs BASE_URL MODEL API_KEY
import OpenAI from "openai";

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });

const completion = await client.completions.create({
  model, prompt: "And God said", max_tokens: 20, temperature: 0,
});

let streamed = "";
let streamFinish = null;
let chunks = 0;
const stream = await client.completions.create({
  model, prompt: "And God said", max_tokens: 20, temperature: 0, stream: true,
});
for await (const chunk of stream) {
  chunks += 1;
  streamed += chunk.choices[0]?.text ?? "";
  streamFinish = chunk.choices[0]?.finish_reason ?? streamFinish;
}

const chat = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "Who made the light?" }], max_tokens: 24, temperature: 0,
});

let refused = null;
try {
  await client.completions.create({ model, prompt: "a", max_tokens: -5 });
} catch (e) {
  refused = { status: e.status, message: e.message };
}

console.log(JSON.stringify({
  completion: completion.choices[0].text,
  finish: completion.choices[0].finish_reason,
  usage: completion.usage,
  streamed, streamFinish, chunks,
  chat: chat.choices[0].message.content,
  chatRole: chat.choices[0].message.role,
  refused,
}));
