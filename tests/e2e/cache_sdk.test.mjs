// The response cache as the official SDKs see it: a repeated deterministic
// request is answered from the cache, streamed event by event (several
// content events, in order, the same text) or whole, with the same usage,
// and the upstream is not asked again.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startProxy } from "./harness.mjs";

let proxy;
before(async () => {
  proxy = await startProxy({
    topYaml: ["routes:", "  - {name: any, models: ['*'], targets: [{upstream: demo}], cache: {ttl: 60s}}"],
  });
});
after(async () => {
  await proxy?.stop();
});

// An answer is kept once its exchange has ended, a moment after its client
// has the whole of it: the next ask waits that moment.
const kept = () => new Promise((r) => setTimeout(r, 100));
const knobs = { headers: { "x-demo": JSON.stringify({ tokens: 6, interval_ms: 2 }) } };
const asked = async () => (await (await fetch(`${proxy.engineURL}/demo/stats`)).json()).requests;
const openai = () => new OpenAI({ baseURL: proxy.baseURL, apiKey: "k", maxRetries: 0 });
const anthropic = () =>
  new Anthropic({ baseURL: proxy.baseURL.replace(/\/v1$/, ""), apiKey: "k", maxRetries: 0 });

test("openai SDK: a hit streams event by event, and a whole hit has the same usage", async () => {
  const ask = { model: "demo", temperature: 0, max_tokens: 50, messages: [{ role: "user", content: "cache me" }] };
  const streamed = async () => {
    const parts = [];
    const stream = await openai().chat.completions.create({ ...ask, stream: true }, knobs);
    for await (const chunk of stream) if (chunk.choices[0]?.delta?.content) parts.push(chunk.choices[0].delta.content);
    return parts;
  };
  const first = await streamed();
  await kept();
  const before = await asked();
  const again = await streamed();
  assert.equal(await asked(), before, "the hit reached the upstream");
  assert.ok(again.length > 1, `${again.length} content events`);
  assert.deepEqual(again, first);

  const whole = await openai().chat.completions.create(ask, knobs);
  await kept();
  const beforeWhole = await asked();
  const { data, response } = await openai().chat.completions.create(ask, knobs).withResponse();
  assert.equal(response.headers.get("x-tokengate-cache"), "hit");
  assert.equal(await asked(), beforeWhole);
  assert.equal(data.choices[0].message.content, whole.choices[0].message.content);
  assert.deepEqual(data.usage, whole.usage);
  assert.notEqual(data.id, whole.id);
});

test("anthropic SDK: a hit streams event by event and whole", async () => {
  const ask = { model: "claude-demo", temperature: 0, max_tokens: 50, messages: [{ role: "user", content: "cache me" }] };
  const streamed = async () => {
    const parts = [];
    const stream = anthropic().messages.stream(ask, knobs);
    stream.on("text", (t) => parts.push(t));
    const final = await stream.finalMessage();
    return { parts, final };
  };
  const first = await streamed();
  await kept();
  const before = await asked();
  const again = await streamed();
  assert.equal(await asked(), before, "the hit reached the upstream");
  assert.ok(again.parts.length > 1, `${again.parts.length} text events`);
  assert.deepEqual(again.parts, first.parts);
  assert.equal(again.final.usage.output_tokens, first.final.usage.output_tokens);
  assert.notEqual(again.final.id, first.final.id);

  const whole = await anthropic().messages.create(ask, knobs);
  await kept();
  const hit = await anthropic().messages.create(ask, knobs);
  assert.equal(hit.content[0].text, whole.content[0].text);
  assert.deepEqual(hit.usage, whole.usage);
});
