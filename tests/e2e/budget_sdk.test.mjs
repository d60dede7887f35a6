// A budget's refusal as the official SDKs see it: a 429 that each turns
// into its own RateLimitError, with Retry-After and OpenAI's
// x-ratelimit-* headers, before any upstream call.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startProxy } from "./harness.mjs";

const key = "sk-e2e-budget";
const sha = createHash("sha256").update(key).digest("hex");
let proxy;
before(async () => (proxy = await startProxy({ topYaml: [
  "routes:",
  "  - {name: chat, models: ['*'], targets: [{upstream: demo}]}",
  "keys:",
  `  - {name: sdk, sha256: "${sha}", budget: {requests_per_minute: 2}}`,
] })));
after(async () => proxy && (await proxy.stop()));

// A header of an SDK error (a Headers object in newer SDKs, a plain object in older ones).
const header = (error, name) =>
  typeof error.headers?.get === "function" ? error.headers.get(name) : error.headers?.[name];

// Calls `once` until it throws (two fit a minute's window; one more call
// covers a window that ended meanwhile); returns what it threw.
async function untilRefused(once) {
  for (let i = 0; i < 6; i++) {
    try {
      await once();
    } catch (e) {
      return e;
    }
  }
  assert.fail("never refused");
}

test("openai SDK gets RateLimitError from a spent budget", async () => {
  const client = new OpenAI({ baseURL: proxy.baseURL, apiKey: key, maxRetries: 0 });
  const requested = await fetch(`${proxy.engineURL}/demo/stats`).then((r) => r.json());
  const error = await untilRefused(() =>
    client.chat.completions.create({ model: "demo", max_tokens: 2, messages: [{ role: "user", content: "hi" }] }));
  assert.ok(error instanceof OpenAI.RateLimitError, `got ${error}`);
  assert.equal(error.status, 429);
  assert.equal(error.code, "rate_limit_exceeded");
  assert.match(error.message, /key:sdk on requests_per_minute: limit 2/);
  assert.match(header(error, "retry-after"), /^\d+$/);
  assert.equal(header(error, "x-ratelimit-limit-requests"), "2");
  assert.equal(header(error, "x-ratelimit-remaining-requests"), "0");
  // The refused call never reached the engine.
  const after = await fetch(`${proxy.engineURL}/demo/stats`).then((r) => r.json());
  assert.ok(after.requests - requested.requests <= 4);
});

test("anthropic SDK gets RateLimitError from a spent budget", async () => {
  const client = new Anthropic({ baseURL: proxy.baseURL.replace(/\/v1$/, ""), apiKey: key, maxRetries: 0 });
  const error = await untilRefused(() =>
    client.messages.create({ model: "demo", max_tokens: 2, messages: [{ role: "user", content: "hi" }] }));
  assert.ok(error instanceof Anthropic.RateLimitError, `got ${error}`);
  assert.equal(error.status, 429);
  assert.equal(error.error.type, "error");
  assert.equal(error.error.error.type, "rate_limit_error");
  assert.match(header(error, "retry-after"), /^\d+$/);
});
