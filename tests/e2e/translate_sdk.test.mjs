// One endpoint, either API: the official SDKs on an upstream that speaks
// the other one. The demo engine is taken for an Anthropic-only provider
// (kind: anthropic) behind the OpenAI SDK, and for an OpenAI-only engine
// (kind: openai) behind the Anthropic SDK; tokengate translates the
// requests, the streams event by event, the answers and the errors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startProxy } from "./harness.mjs";

const routes = [
  "routes:",
  "  - name: any",
  "    models: ['*']",
  "    targets: [{upstream: demo}]",
  "    max_output_tokens: {default: 64, ceiling: 256, mode: clamp}",
];
let claude, local;  // the demo engine as Anthropic's API, and as an OpenAI-compatible engine
before(async () => {
  claude = await startProxy({ kind: "anthropic", topYaml: routes });
  local = await startProxy({ kind: "openai", topYaml: routes });
});
after(async () => {
  await claude?.stop();
  await local?.stop();
});

const openai = () => new OpenAI({ baseURL: claude.baseURL, apiKey: "k", maxRetries: 0 });
const anthropic = () =>
  new Anthropic({ baseURL: local.baseURL.replace(/\/v1$/, ""), apiKey: "k", maxRetries: 0 });
const knobs = (o) => ({ headers: { "x-demo": JSON.stringify(o) } });
const stats = (proxy) => fetch(`${proxy.engineURL}/demo/stats`).then((r) => r.json());

test("openai SDK streams text from an Anthropic upstream, with usage", async () => {
  const stream = await openai().chat.completions.create(
    {
      model: "claude-sonnet",
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hi" },
      ],
    },
    knobs({ tokens: 5, interval_ms: 2 }),
  );
  let text = "", finish, usage, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.choices[0]?.delta?.content) text += chunk.choices[0].delta.content;
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
    if (chunk.usage) usage = chunk.usage;
    assert.equal(chunk.object, "chat.completion.chunk");
  }
  assert.equal(text, "The quick brown fox jumps");
  assert.equal(finish, "stop");
  assert.equal(usage.completion_tokens, 5);
  assert.ok(usage.prompt_tokens > 0);
  assert.ok(chunks >= 7, `${chunks} chunks: one per token, not one at the end`);
  // What the engine was sent: Anthropic's request, system apart.
  const sent = JSON.parse((await stats(claude)).last_request.body);
  assert.equal((await stats(claude)).last_request.target, "/v1/messages");
  assert.equal(sent.system, "Be brief.");
  assert.deepEqual(sent.messages, [{ role: "user", content: [{ type: "text", text: "hi" }] }]);
  assert.equal(sent.max_tokens, 64);  // the route's default: Anthropic requires one
});

test("openai SDK assembles a tool call streamed by an Anthropic upstream", async () => {
  const stream = openai().chat.completions.stream(
    {
      model: "claude-sonnet",
      messages: [{ role: "user", content: "Call the tool." }],
      tools: [{ type: "function", function: { name: "demo_tool", parameters: { type: "object" } } }],
    },
    knobs({ tool_call: true, tokens: 5, interval_ms: 2 }),
  );
  let chunks = 0;
  for await (const chunk of stream) if (chunk.choices[0]?.delta?.tool_calls) chunks++;
  const final = await stream.finalChatCompletion();
  const call = final.choices[0].message.tool_calls[0];
  assert.equal(final.choices[0].finish_reason, "tool_calls");
  assert.equal(call.function.name, "demo_tool");
  assert.deepEqual(JSON.parse(call.function.arguments), { text: "The quick brown fox jumps" });
  assert.equal(chunks, 6, "the call's name, then five fragments");
  const sent = JSON.parse((await stats(claude)).last_request.body);
  assert.deepEqual(sent.tools, [{ name: "demo_tool", input_schema: { type: "object" } }]);
});

test("openai SDK gets a whole completion from an Anthropic upstream", async () => {
  const done = await openai().chat.completions.create(
    { model: "claude-sonnet", max_tokens: 3, messages: [{ role: "user", content: "hi" }] },
    knobs({ tokens: 10 }),
  );
  assert.equal(done.object, "chat.completion");
  assert.equal(done.choices[0].message.content, "The quick brown");
  assert.equal(done.choices[0].finish_reason, "length");
  assert.equal(done.usage.completion_tokens, 3);
});

test("openai SDK: Anthropic's 429 and 529 arrive as RateLimitError and a 503", async () => {
  const ask = (status) =>
    openai().chat.completions.create(
      { model: "claude-sonnet", messages: [{ role: "user", content: "hi" }] },
      knobs({ status }),
    );
  const limited = await ask(429).catch((e) => e);
  assert.ok(limited instanceof OpenAI.RateLimitError, `got ${limited}`);
  assert.equal(limited.code, "rate_limit_exceeded");
  const overloaded = await ask(529).catch((e) => e);
  assert.ok(overloaded instanceof OpenAI.InternalServerError, `got ${overloaded}`);
  assert.equal(overloaded.status, 503);
  assert.equal(overloaded.code, "overloaded");
});

test("openai SDK: an abort mid-stream reaches the Anthropic upstream", async () => {
  const before = await stats(claude);
  const controller = new AbortController();
  const stream = await openai().chat.completions.create(
    { model: "claude-sonnet", stream: true, messages: [{ role: "user", content: "hi" }] },
    { ...knobs({ tokens: 200, interval_ms: 20 }), signal: controller.signal },
  );
  let got = 0;
  // (The SDK ends the iteration quietly on an abort, or throws: either way it stops early.
  // Chunks it had already read may still be handed out after the abort: on a loaded
  // machine several events arrive in one read, so the loop stops at the abort itself.)
  try {
    for await (const chunk of stream)
      if (chunk.choices[0]?.delta?.content && ++got === 3) {
        controller.abort();
        break;
      }
  } catch {}
  assert.equal(got, 3);
  for (let i = 0; i < 250 && (await stats(claude)).cancelled === before.cancelled; i++)
    await new Promise((r) => setTimeout(r, 20));
  assert.equal((await stats(claude)).cancelled, before.cancelled + 1);
});

test("anthropic SDK streams text from an OpenAI-compatible engine, with usage", async () => {
  const stream = anthropic().messages.stream(
    { model: "local-llm", max_tokens: 5, system: "Be brief.", messages: [{ role: "user", content: "hi" }] },
    knobs({ interval_ms: 2 }),
  );
  let text = "", events = 0;
  stream.on("text", (t) => (text += t));
  stream.on("streamEvent", () => events++);
  const final = await stream.finalMessage();
  assert.equal(text, "The quick brown fox jumps");
  assert.equal(final.stop_reason, "max_tokens");
  assert.equal(final.usage.output_tokens, 5);
  assert.ok(final.usage.input_tokens > 0);
  assert.ok(events >= 9, `${events} events`);
  const last = (await stats(local)).last_request;
  assert.equal(last.target, "/v1/chat/completions");
  const sent = JSON.parse(last.body);
  assert.deepEqual(sent.messages[0], { role: "system", content: "Be brief." });
  assert.deepEqual(sent.stream_options, { include_usage: true });
});

test("anthropic SDK assembles a tool call streamed by an OpenAI-compatible engine", async () => {
  const stream = anthropic().messages.stream(
    {
      model: "local-llm",
      max_tokens: 50,
      messages: [{ role: "user", content: "Call the tool." }],
      tools: [{ name: "demo_tool", input_schema: { type: "object", properties: { text: { type: "string" } } } }],
    },
    knobs({ tool_call: true, tokens: 5, interval_ms: 2 }),
  );
  const fragments = [];
  stream.on("inputJson", (partial) => fragments.push(partial));
  const final = await stream.finalMessage();
  assert.equal(final.stop_reason, "tool_use");
  assert.equal(final.content[0].type, "tool_use");
  assert.equal(final.content[0].name, "demo_tool");
  assert.deepEqual(final.content[0].input, { text: "The quick brown fox jumps" });
  assert.equal(fragments.length, 5);
  // A tool result sent back goes to the engine as a tool message.
  const reply = await anthropic().messages.create(
    {
      model: "local-llm",
      max_tokens: 3,
      messages: [
        { role: "user", content: "Call the tool." },
        { role: "assistant", content: final.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: final.content[0].id, content: "done" }] },
      ],
    },
  );
  assert.equal(reply.type, "message");
  const sent = JSON.parse((await stats(local)).last_request.body);
  assert.equal(sent.messages[1].tool_calls[0].function.name, "demo_tool");
  assert.deepEqual(sent.messages[2], { role: "tool", tool_call_id: final.content[0].id, content: "done" });
});

test("anthropic SDK: an engine's 429 and 503 arrive as RateLimitError and a 529", async () => {
  const ask = (status) =>
    anthropic().messages.create(
      { model: "local-llm", max_tokens: 5, messages: [{ role: "user", content: "hi" }] },
      knobs({ status }),
    );
  const limited = await ask(429).catch((e) => e);
  assert.ok(limited instanceof Anthropic.RateLimitError, `got ${limited}`);
  assert.equal(limited.error.error.type, "rate_limit_error");
  const overloaded = await ask(503).catch((e) => e);
  assert.ok(overloaded instanceof Anthropic.InternalServerError, `got ${overloaded}`);
  assert.equal(overloaded.status, 529);
  assert.equal(overloaded.error.error.type, "overloaded_error");
});

test("anthropic SDK: an abort mid-stream reaches the OpenAI-compatible engine", async () => {
  const before = await stats(local);
  const stream = anthropic().messages.stream(
    { model: "local-llm", max_tokens: 200, messages: [{ role: "user", content: "hi" }] },
    knobs({ tokens: 200, interval_ms: 20 }),
  );
  let got = 0;
  stream.on("text", () => ++got === 3 && stream.abort());
  await assert.rejects(stream.finalMessage());
  for (let i = 0; i < 250 && (await stats(local)).cancelled === before.cancelled; i++)
    await new Promise((r) => setTimeout(r, 20));
  assert.equal((await stats(local)).cancelled, before.cancelled + 1);
});

test("a member with no counterpart is refused with a 400 naming it", async () => {
  const error = await openai()
    .chat.completions.create({ model: "claude-sonnet", n: 2, messages: [{ role: "user", content: "hi" }] })
    .catch((e) => e);
  assert.ok(error instanceof OpenAI.BadRequestError, `got ${error}`);
  assert.equal(error.code, "unsupported_parameter");
  assert.match(error.message, /n other than 1/);
});

test("an engine that overruns the limit is cut in the client's dialect", async () => {
  // The engine ignores max_tokens: tokengate ends the stream at the limit.
  const chat = await openai().chat.completions.create(
    { model: "claude-sonnet", stream: true, max_tokens: 3, messages: [{ role: "user", content: "hi" }] },
    knobs({ tokens: 20, ignore_limit: true, interval_ms: 2 }),
  );
  let text = "", finish;
  for await (const chunk of chat) {
    text += chunk.choices[0]?.delta?.content ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, "The quick brown");
  assert.equal(finish, "length");

  const message = await anthropic()
    .messages.stream(
      { model: "local-llm", max_tokens: 3, messages: [{ role: "user", content: "hi" }] },
      knobs({ tokens: 20, ignore_limit: true, interval_ms: 2 }),
    )
    .finalMessage();
  assert.equal(message.content[0].text, "The quick brown");
  assert.equal(message.stop_reason, "max_tokens");
  assert.equal(message.usage.output_tokens, 3);
});
