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
