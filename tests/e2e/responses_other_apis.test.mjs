// The official SDKs across the APIs an engine does not serve: the openai
// SDK's Responses API on an engine that speaks Anthropic's messages alone
// (demo engine --apis messages), and the @anthropic-ai/sdk and the openai
// SDK's chat completions on an engine that serves the Responses API alone
// (--apis responses). tokengate translates each request to the engine's
// API and each answer, event by event, back.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startProxy } from "./harness.mjs";

const routeYaml = [
  "routes:",
  "  - name: only",
  "    models: ['*']",
  "    targets: [{upstream: demo}]",
  "    max_output_tokens: {default: 64, ceiling: 256, mode: clamp}",
  "    retry: {rate_limited: 0}",
];

let claude, gpt;
before(async () => {
  claude = await startProxy({
    engineArgs: ["--apis", "messages"],
    upstreamYaml: ["    apis: [messages]"],
    topYaml: routeYaml,
  });
  gpt = await startProxy({
    engineArgs: ["--apis", "responses"],
    upstreamYaml: ["    apis: [responses]"],
    topYaml: routeYaml,
  });
});
after(async () => {
  await claude?.stop();
  await gpt?.stop();
});

const openai = (proxy) => new OpenAI({ baseURL: proxy.baseURL, apiKey: "k", maxRetries: 0 });
const anthropic = () =>
  new Anthropic({ baseURL: gpt.baseURL.replace(/\/v1$/, ""), apiKey: "k", maxRetries: 0 });
const knobs = (o) => ({ headers: { "x-demo": JSON.stringify(o) } });
const lastRequest = async (proxy) =>
  (await fetch(`${proxy.engineURL}/demo/stats`).then((r) => r.json())).last_request;
const responsesTools = [
  { type: "function", name: "demo_tool", parameters: { type: "object", properties: { text: { type: "string" } } } },
];

// Iterates a stream to its end or its error: the events seen, and the error thrown.
async function drain(stream) {
  const events = [];
  try {
    for await (const event of stream) events.push(event);
  } catch (error) {
    return { events, error };
  }
  return { events, error: null };
}

test("responses.stream on an Anthropic engine: text event by event, with usage", async () => {
  const stream = openai(claude).responses.stream(
    { model: "claude-x", instructions: "Be brief.", input: "hi" },
    knobs({ tokens: 5, interval_ms: 5 }),
  );
  const deltas = [];
  for await (const event of stream) if (event.type === "response.output_text.delta") deltas.push(event.delta);
  const done = await stream.finalResponse();
  assert.deepEqual(deltas, ["The", " quick", " brown", " fox", " jumps"]);
  assert.equal(done.output_text, "The quick brown fox jumps");
  assert.equal(done.status, "completed");
  assert.equal(done.usage.output_tokens, 5);
  assert.ok(done.usage.input_tokens > 0);
  const sent = await lastRequest(claude);
  assert.equal(sent.target, "/v1/messages");
  const body = JSON.parse(sent.body);
  assert.equal(body.system, "Be brief.");
  assert.equal(body.max_tokens, 64); // the route's default
});

test("responses.stream on an Anthropic engine: thinking arrives as reasoning summary events", async () => {
  const stream = openai(claude).responses.stream(
    { model: "claude-x", input: "hi" },
    knobs({ tokens: 6, reasoning_tokens: 3, interval_ms: 2 }),
  );
  const summary = [];
  const types = [];
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === "response.reasoning_summary_text.delta") summary.push(event.delta);
  }
  const done = await stream.finalResponse();
  assert.deepEqual(summary, ["The", " quick", " brown"]);
  for (const type of [
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_text.done",
    "response.reasoning_summary_part.done",
  ])
    assert.ok(types.includes(type), `no ${type} in ${types.join(", ")}`);
  assert.equal(done.output[0].type, "reasoning");
  assert.equal(done.output[0].summary[0].text, "The quick brown");
  assert.equal(done.output_text, " fox jumps over");
  assert.equal(done.status, "completed");

  const whole = await openai(claude).responses.create(
    { model: "claude-x", input: "hi" },
    knobs({ tokens: 6, reasoning_tokens: 3 }),
  );
  assert.equal(whole.output[0].summary[0].text, "The quick brown");
  assert.equal(whole.output_text, " fox jumps over");
});

test("responses.create on an Anthropic engine: a whole answer, cut at the limit", async () => {
  const done = await openai(claude).responses.create(
    { model: "claude-x", input: "hi", max_output_tokens: 3 },
    knobs({ tokens: 10 }),
  );
  assert.equal(done.object, "response");
  assert.equal(done.output_text, "The quick brown");
  assert.equal(done.status, "incomplete");
  assert.equal(done.incomplete_details.reason, "max_output_tokens");
  assert.equal(done.usage.output_tokens, 3);
});

test("a tool-call loop on an Anthropic engine", async () => {
  const stream = openai(claude).responses.stream(
    { model: "claude-x", input: [{ role: "user", content: "Call the tool." }], tools: responsesTools },
    knobs({ tool_call: true, tokens: 5, interval_ms: 2 }),
  );
  let fragments = 0;
  for await (const event of stream) if (event.type === "response.function_call_arguments.delta") fragments++;
  const first = await stream.finalResponse();
  const call = first.output.find((item) => item.type === "function_call");
  assert.ok(call, JSON.stringify(first.output));
  assert.deepEqual(JSON.parse(call.arguments), { text: "The quick brown fox jumps" });
  assert.equal(fragments, 5);
  const answer = await openai(claude).responses.create(
    {
      model: "claude-x",
      tools: responsesTools,
      input: [
        { role: "user", content: "Call the tool." },
        ...first.output,
        { type: "function_call_output", call_id: call.call_id, output: "done" },
      ],
    },
    knobs({ tokens: 2 }),
  );
  assert.equal(answer.output_text, "The quick");
  const messages = JSON.parse((await lastRequest(claude)).body).messages;
  assert.equal(messages[1].content[0].type, "tool_use");
  assert.equal(messages[1].content[0].id, call.call_id);
  assert.deepEqual(messages[2].content[0].type, "tool_result");
  assert.equal(messages[2].content[0].tool_use_id, call.call_id);
});

test("an Anthropic engine's overrun, failure and 429 in the Responses API", async () => {
  const cut = openai(claude).responses.stream(
    { model: "claude-x", input: "hi", max_output_tokens: 3 },
    knobs({ tokens: 20, ignore_limit: true, interval_ms: 2 }),
  );
  let last;
  for await (const event of cut) last = event.type;
  assert.equal(last, "response.incomplete");
  assert.equal((await cut.finalResponse()).usage.output_tokens, 3);

  const broken = await drain(
    openai(claude).responses.stream({ model: "claude-x", input: "hi" }, knobs({ tokens: 10, error_after: 3 })),
  );
  const text = broken.events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta);
  assert.deepEqual(text, ["The", " quick", " brown"]);
  assert.ok(
    broken.error || broken.events.at(-1).type === "response.failed",
    `ended with ${broken.events.at(-1)?.type}`,
  );
  assert.ok(!broken.events.some((e) => e.type === "response.completed"));

  const limited = await openai(claude)
    .responses.create({ model: "claude-x", input: "hi" }, knobs({ status: 429 }))
    .catch((e) => e);
  assert.ok(limited instanceof OpenAI.RateLimitError, `got ${limited}`);
});

test("the Anthropic SDK on a Responses-only engine: a stream with usage, then a cut", async () => {
  const stream = anthropic().messages.stream(
    { model: "gpt-x", max_tokens: 100, system: "Be brief.", messages: [{ role: "user", content: "hi" }] },
    knobs({ tokens: 5, interval_ms: 2 }),
  );
  let text = "";
  stream.on("text", (t) => (text += t));
  const final = await stream.finalMessage();
  assert.equal(text, "The quick brown fox jumps");
  assert.equal(final.stop_reason, "end_turn");
  assert.equal(final.usage.output_tokens, 5);
  assert.ok(final.usage.input_tokens > 0);
  const sent = await lastRequest(gpt);
  assert.equal(sent.target, "/v1/responses");
  const body = JSON.parse(sent.body);
  assert.equal(body.max_output_tokens, 100);
  assert.equal(body.store, false);
  assert.deepEqual(body.input[0], { role: "system", content: "Be brief." });

  const cut = await anthropic().messages.create(
    { model: "gpt-x", max_tokens: 3, messages: [{ role: "user", content: "hi" }] },
    knobs({ tokens: 10 }),
  );
  assert.equal(cut.stop_reason, "max_tokens");
  assert.equal(cut.content[0].text, "The quick brown");
  assert.equal(cut.usage.output_tokens, 3);
});

test("the Anthropic SDK on a Responses-only engine: reasoning arrives as thinking", async () => {
  const stream = anthropic().messages.stream(
    { model: "gpt-x", max_tokens: 100, messages: [{ role: "user", content: "hi" }] },
    knobs({ tokens: 6, reasoning_tokens: 3, interval_ms: 2 }),
  );
  let thinking = "";
  let text = "";
  stream.on("thinking", (t) => (thinking += t));
  stream.on("text", (t) => (text += t));
  const final = await stream.finalMessage();
  assert.equal(thinking, "The quick brown");
  assert.equal(text, " fox jumps over");
  assert.equal(final.content[0].type, "thinking");
  assert.equal(final.content[1].text, " fox jumps over");
});

test("the Anthropic SDK on a Responses-only engine: a tool-call loop", async () => {
  const tools = [{ name: "demo_tool", input_schema: { type: "object", properties: { text: { type: "string" } } } }];
  const stream = anthropic().messages.stream(
    { model: "gpt-x", max_tokens: 100, messages: [{ role: "user", content: "Call the tool." }], tools },
    knobs({ tool_call: true, tokens: 5, interval_ms: 2 }),
  );
  const first = await stream.finalMessage();
  assert.equal(first.stop_reason, "tool_use");
  const use = first.content.find((b) => b.type === "tool_use");
  assert.ok(use, JSON.stringify(first.content));
  assert.equal(use.name, "demo_tool");
  assert.deepEqual(use.input, { text: "The quick brown fox jumps" });
  const answer = await anthropic().messages.create(
    {
      model: "gpt-x",
      max_tokens: 100,
      tools,
      messages: [
        { role: "user", content: "Call the tool." },
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "done" }] },
      ],
    },
    knobs({ tokens: 2 }),
  );
  assert.equal(answer.content[0].text, "The quick");
  const input = JSON.parse((await lastRequest(gpt)).body).input;
  const call = input.find((i) => i.type === "function_call");
  assert.equal(call.call_id, use.id);
  assert.deepEqual(JSON.parse(call.arguments), { text: "The quick brown fox jumps" });
  assert.deepEqual(input.find((i) => i.type === "function_call_output"), {
    type: "function_call_output",
    call_id: use.id,
    output: "done",
  });
});

test("the Anthropic SDK on a Responses-only engine: a failure mid-stream and a 429", async () => {
  const stream = anthropic().messages.stream(
    { model: "gpt-x", max_tokens: 100, messages: [{ role: "user", content: "hi" }] },
    knobs({ tokens: 10, error_after: 3, interval_ms: 2 }),
  );
  let text = "";
  stream.on("text", (t) => (text += t));
  await assert.rejects(stream.finalMessage());
  assert.equal(text, "The quick brown");
  const limited = await anthropic()
    .messages.create({ model: "gpt-x", max_tokens: 5, messages: [{ role: "user", content: "hi" }] }, knobs({ status: 429 }))
    .catch((e) => e);
  assert.ok(limited instanceof Anthropic.RateLimitError, `got ${limited}`);
});

test("openai chat completions on a Responses-only engine", async () => {
  const stream = await openai(gpt).chat.completions.create(
    { model: "gpt-x", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "hi" }] },
    knobs({ tokens: 5, interval_ms: 2 }),
  );
  let text = "";
  let usage, finish;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, "The quick brown fox jumps");
  assert.equal(finish, "stop");
  assert.equal(usage.completion_tokens, 5);
  assert.ok(usage.prompt_tokens > 0);

  const call = await openai(gpt).chat.completions.create(
    {
      model: "gpt-x",
      messages: [{ role: "user", content: "Call the tool." }],
      tools: [{ type: "function", function: { name: "demo_tool", parameters: { type: "object" } } }],
    },
    knobs({ tool_call: true, tokens: 5 }),
  );
  assert.equal(call.choices[0].finish_reason, "tool_calls");
  assert.deepEqual(JSON.parse(call.choices[0].message.tool_calls[0].function.arguments), {
    text: "The quick brown fox jumps",
  });

  const cut = await openai(gpt).chat.completions.create(
    { model: "gpt-x", max_tokens: 3, messages: [{ role: "user", content: "hi" }] },
    knobs({ tokens: 10 }),
  );
  assert.equal(cut.choices[0].finish_reason, "length");
  assert.equal(cut.choices[0].message.content, "The quick brown");

  const refused = await openai(gpt)
    .chat.completions.create({ model: "gpt-x", stop: ["x"], messages: [{ role: "user", content: "hi" }] })
    .catch((e) => e);
  assert.ok(refused instanceof OpenAI.BadRequestError, `got ${refused}`);
  assert.match(refused.message, /'stop'/);
});
