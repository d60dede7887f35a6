// The official `@anthropic-ai/sdk` streams /v1/messages through the proxy.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { startProxy } from "./harness.mjs";

let proxy;
before(async () => (proxy = await startProxy()));
after(async () => proxy && (await proxy.stop()));

test("anthropic SDK streams a message", async () => {
  // The SDK appends /v1/messages to its baseURL.
  const client = new Anthropic({ baseURL: proxy.baseURL.replace(/\/v1$/, ""), apiKey: "k" });
  const stream = client.messages.stream({
    model: "demo",
    max_tokens: 5,
    messages: [{ role: "user", content: "hi" }],
  });
  let text = "";
  stream.on("text", (t) => (text += t));
  const final = await stream.finalMessage();
  assert.equal(text, "The quick brown fox jumps");
  assert.equal(final.stop_reason, "max_tokens");
  assert.equal(final.usage.output_tokens, 5);
});

test("anthropic SDK assembles a streamed tool call", async () => {
  // The demo engine answers with one call of demo_tool, its input streamed
  // a token at a time as input_json_delta events (read by the proxy's
  // lean reader, passed on untouched).
  const client = new Anthropic({ baseURL: proxy.baseURL.replace(/\/v1$/, ""), apiKey: "k" });
  const stream = client.messages.stream({
    model: "demo",
    max_tokens: 50,
    messages: [{ role: "user", content: "Call the tool." }],
    tools: [{ name: "demo_tool", input_schema: { type: "object", properties: { text: { type: "string" } } } }],
    demo: { tool_call: true, tokens: 5, interval_ms: 2 },
  });
  const fragments = [];
  stream.on("inputJson", (partial) => fragments.push(partial));
  const final = await stream.finalMessage();
  assert.equal(final.stop_reason, "tool_use");
  assert.equal(final.content[0].type, "tool_use");
  assert.equal(final.content[0].name, "demo_tool");
  assert.deepEqual(final.content[0].input, { text: "The quick brown fox jumps" });
  assert.equal(fragments.length, 5);
});
