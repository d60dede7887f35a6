// The response cache as the official SDKs see it: a repeated deterministic
// request is answered from the cache, streamed event by event (several
// content events, in order, the same text) or whole, whichever form kept
// the entry (a stream read whole, a whole answer read as a stream), with
// the original's usage and the prompt marked cached, and the upstream is
// not asked again.
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

// openai SDK, chat completions: the text pieces, the usage and the cache header.
const chat = {
  async streamed(ask) {
    const { data, response } = await openai()
      .chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } }, knobs)
      .withResponse();
    const parts = [];
    let usage;
    for await (const chunk of data) {
      if (chunk.choices[0]?.delta?.content) parts.push(chunk.choices[0].delta.content);
      if (chunk.usage) usage = chunk.usage;
    }
    return { parts, text: parts.join(""), usage, cache: response.headers.get("x-tokengate-cache") };
  },
  async whole(ask) {
    const { data, response } = await openai().chat.completions.create(ask, knobs).withResponse();
    return { text: data.choices[0].message.content, usage: data.usage, id: data.id,
             cache: response.headers.get("x-tokengate-cache") };
  },
  ask: (say) => ({ model: "demo", temperature: 0, max_tokens: 50, messages: [{ role: "user", content: say }] }),
  // the hit's usage: the original's, the whole prompt cached
  checkUsage(hit, original) {
    assert.equal(hit.prompt_tokens, original.prompt_tokens);
    assert.equal(hit.completion_tokens, original.completion_tokens);
    assert.equal(hit.prompt_tokens_details?.cached_tokens, original.prompt_tokens);
    assert.ok(original.prompt_tokens > 0);
  },
};

// Anthropic SDK, messages: the same, from its raw events.
const messages = {
  async streamed(ask) {
    const { data, response } = await anthropic().messages.create({ ...ask, stream: true }, knobs).withResponse();
    const parts = [];
    let usage = {};
    for await (const event of data) {
      if (event.type === "message_start") usage = { ...event.message.usage };
      if (event.type === "content_block_delta" && event.delta.type === "text_delta") parts.push(event.delta.text);
      if (event.type === "message_delta") usage = { ...usage, ...event.usage };
    }
    return { parts, text: parts.join(""), usage, cache: response.headers.get("x-tokengate-cache") };
  },
  async whole(ask) {
    const { data, response } = await anthropic().messages.create(ask, knobs).withResponse();
    return { text: data.content[0].text, usage: data.usage, id: data.id,
             cache: response.headers.get("x-tokengate-cache") };
  },
  ask: (say) => ({ model: "claude-demo", temperature: 0, max_tokens: 50, messages: [{ role: "user", content: say }] }),
  checkUsage(hit, original) {
    const prompt = original.input_tokens + (original.cache_read_input_tokens ?? 0) +
      (original.cache_creation_input_tokens ?? 0);
    assert.equal(hit.output_tokens, original.output_tokens);
    assert.equal(hit.input_tokens, 0);
    assert.equal(hit.cache_read_input_tokens, prompt);
    assert.ok(prompt > 0);
  },
};

for (const [name, api] of [["openai SDK chat", chat], ["anthropic SDK", messages]]) {
  test(`${name}: a stream kept is a hit streamed event by event, and whole`, async () => {
    const ask = api.ask(`${name}: kept streamed`);
    const first = await api.streamed(ask);
    assert.equal(first.cache, "miss");
    await kept();
    const before = await asked();
    const again = await api.streamed(ask);
    assert.equal(again.cache, "hit");
    assert.ok(again.parts.length > 1, `${again.parts.length} content events`);
    assert.deepEqual(again.parts, first.parts);
    api.checkUsage(again.usage, first.usage);
    const whole = await api.whole(ask);
    assert.equal(whole.cache, "hit");
    assert.equal(whole.text, first.text);
    api.checkUsage(whole.usage, first.usage);
    assert.equal(await asked(), before, "a hit reached the upstream");
  });

  test(`${name}: a whole answer kept is a hit whole, and streamed event by event`, async () => {
    const ask = api.ask(`${name}: kept whole`);
    const first = await api.whole(ask);
    assert.equal(first.cache, "miss");
    await kept();
    const before = await asked();
    const again = await api.whole(ask);
    assert.equal(again.cache, "hit");
    assert.equal(again.text, first.text);
    assert.notEqual(again.id, first.id);
    api.checkUsage(again.usage, first.usage);
    const streamed = await api.streamed(ask);
    assert.equal(streamed.cache, "hit");
    assert.ok(streamed.parts.length > 1, `${streamed.parts.length} content events`);
    assert.equal(streamed.text, first.text);
    api.checkUsage(streamed.usage, first.usage);
    assert.equal(await asked(), before, "a hit reached the upstream");
  });
}
