// The official `openai` package, its baseURL pointed at tokengate, streams
// chat completions and Responses API answers through the real binary to the
// demo engine.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startProxy } from "./harness.mjs";

let proxy;
before(async () => {
  process.env.TG_E2E_UPSTREAM_KEY = "sk-e2e-upstream";
  proxy = await startProxy({ upstreamKeyEnv: "TG_E2E_UPSTREAM_KEY" });
});
after(async () => proxy && (await proxy.stop()));

test("openai SDK streams a chat completion token by token", async () => {
  const client = new OpenAI({ baseURL: proxy.baseURL, apiKey: "client-key-not-forwarded" });
  const stream = await client.chat.completions.create({
    model: "demo",
    stream: true,
    max_tokens: 6,
    stream_options: { include_usage: true },
    messages: [{ role: "user", content: "Say something." }],
  });
  let text = "";
  let chunks = 0;
  let finish = null;
  let usage = null;
  const arrivals = [];
  for await (const chunk of stream) {
    chunks++;
    arrivals.push(performance.now());
    if (chunk.choices[0]?.delta?.content) text += chunk.choices[0].delta.content;
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, "The quick brown fox jumps over");
  assert.equal(finish, "length");
  assert.equal(usage.completion_tokens, 6);
  assert.ok(chunks >= 8, `expected role + 6 tokens + finish chunks, got ${chunks}`);
  // At 200 tokens/s the six tokens span ~25 ms: they were not delivered at once.
  assert.ok(arrivals.at(-1) - arrivals[0] >= 15, "chunks arrived all at once");

  const seen = await (await fetch(`${proxy.engineURL}/demo/stats`)).json();
  assert.equal(seen.last_request.headers.Authorization, "Bearer sk-e2e-upstream");
});

test("openai SDK assembles a streamed tool call", async () => {
  // The demo engine answers with one call of demo_tool, its arguments
  // streamed a token at a time (read by the proxy's lean reader, passed on
  // untouched); the SDK's stream helper puts them together.
  const client = new OpenAI({ baseURL: proxy.baseURL, apiKey: "k" });
  const stream = client.chat.completions.stream({
    model: "demo",
    max_tokens: 50,
    messages: [{ role: "user", content: "Call the tool." }],
    tools: [{ type: "function", function: { name: "demo_tool", parameters: { type: "object", properties: { text: { type: "string" } } } } }],
    demo: { tool_call: true, tokens: 5, interval_ms: 2 },
  });
  let chunks = 0;
  for await (const chunk of stream) if (chunk.choices[0]?.delta?.tool_calls) chunks++;
  const done = await stream.finalChatCompletion();
  const call = done.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, "demo_tool");
  assert.deepEqual(JSON.parse(call.function.arguments), { text: "The quick brown fox jumps" });
  assert.equal(done.choices[0].finish_reason, "tool_calls");
  assert.equal(chunks, 6, "the call's name, then five fragments");
});

test("openai SDK streams a Responses API answer through the proxy", async () => {
  // OpenAI's newer API: typed events numbered in order, no [DONE]. The
  // SDK's stream helper checks the events' order and builds the response.
  const client = new OpenAI({ baseURL: proxy.baseURL, apiKey: "k" });
  const stream = client.responses.stream({
    model: "demo",
    input: "Say something.",
    max_output_tokens: 4,
    demo: { interval_ms: 10 },
  });
  const deltas = [];
  const arrivals = [];
  for await (const event of stream) {
    if (event.type !== "response.output_text.delta") continue;
    deltas.push(event.delta);
    arrivals.push(performance.now());
  }
  const done = await stream.finalResponse();
  assert.deepEqual(deltas, ["The", " quick", " brown", " fox"]);
  assert.equal(done.output_text, "The quick brown fox");
  assert.equal(done.status, "incomplete");
  assert.equal(done.incomplete_details.reason, "max_output_tokens");
  assert.equal(done.usage.output_tokens, 4);
  // Three gaps of 10 ms: they were not delivered at once.
  assert.ok(arrivals.at(-1) - arrivals[0] >= 15, "deltas arrived all at once");
});

test("openai SDK gets a non-streaming Responses API answer", async () => {
  const client = new OpenAI({ baseURL: proxy.baseURL, apiKey: "k" });
  const done = await client.responses.create({ model: "demo", input: "hi", max_output_tokens: 2 });
  assert.equal(done.output_text, "The quick");
  assert.equal(done.usage.output_tokens, 2);
});

test("openai SDK gets a non-streaming completion", async () => {
  const client = new OpenAI({ baseURL: proxy.baseURL, apiKey: "k" });
  const done = await client.chat.completions.create({
    model: "demo",
    max_tokens: 2,
    messages: [{ role: "user", content: "hi" }],
  });
  assert.equal(done.choices[0].message.content, "The quick");
});

test("openai SDK surfaces a cut stream as an error, not a short answer", async () => {
  const client = new OpenAI({ baseURL: proxy.baseURL, apiKey: "k", maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: "demo",
    stream: true,
    messages: [{ role: "user", content: "hi" }],
    demo: { tokens: 10, interval_ms: 5, reset_after: 3 },
  });
  await assert.rejects(async () => {
    for await (const _ of stream) {
      /* consume */
    }
  }, /upstream/);
});
