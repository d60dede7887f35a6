// The OpenAI SDK's Responses API on an engine that serves chat completions
// alone: the demo engine started with --apis chat_completions (its
// /v1/responses answers 404, as llama.cpp's server does), behind an
// upstream with apis: [chat_completions]. tokengate translates the
// request to chat completions and the answer, event by event, back.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startProxy } from "./harness.mjs";

let llama;
before(async () => {
  llama = await startProxy({
    engineArgs: ["--apis", "chat_completions"],
    upstreamYaml: ["    apis: [chat_completions]"],
    topYaml: [
      "routes:",
      "  - name: llama",
      "    models: ['*']",
      "    targets: [{upstream: demo}]",
      "    max_output_tokens: {default: 64, ceiling: 256, mode: clamp}",
    ],
  });
});
after(async () => {
  await llama?.stop();
});

const client = () => new OpenAI({ baseURL: llama.baseURL, apiKey: "k", maxRetries: 0 });
const knobs = (o) => ({ headers: { "x-demo": JSON.stringify(o) } });
const lastRequest = async () => (await fetch(`${llama.engineURL}/demo/stats`).then((r) => r.json())).last_request;
const tools = [
  { type: "function", name: "demo_tool", parameters: { type: "object", properties: { text: { type: "string" } } } },
];

test("the engine itself does not serve the Responses API", async () => {
  const answer = await fetch(`${llama.engineURL}/v1/responses`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "demo", input: "hi" }),
  });
  assert.equal(answer.status, 404);
});

test("responses.stream: text event by event, with usage", async () => {
  const stream = client().responses.stream(
    { model: "llama-3", instructions: "Be brief.", input: "hi" },
    knobs({ tokens: 5, interval_ms: 5 }),
  );
  const deltas = [];
  const types = new Set();
  for await (const event of stream) {
    types.add(event.type);
    if (event.type === "response.output_text.delta") deltas.push(event.delta);
  }
  const done = await stream.finalResponse();
  assert.deepEqual(deltas, ["The", " quick", " brown", " fox", " jumps"]);
  assert.equal(done.output_text, "The quick brown fox jumps");
  assert.equal(done.status, "completed");
  assert.equal(done.usage.output_tokens, 5);
  assert.ok(done.usage.input_tokens > 0);
  assert.equal(done.usage.total_tokens, done.usage.input_tokens + 5);
  for (const type of ["response.created", "response.in_progress", "response.output_item.added",
    "response.content_part.added", "response.output_text.done", "response.output_item.done", "response.completed"])
    assert.ok(types.has(type), `no ${type}`);
  const sent = await lastRequest();
  assert.equal(sent.target, "/v1/chat/completions");
  const body = JSON.parse(sent.body);
  assert.deepEqual(body.messages, [
    { role: "system", content: "Be brief." },
    { role: "user", content: "hi" },
  ]);
  assert.deepEqual(body.stream_options, { include_usage: true });
  assert.equal(body.max_tokens, 64);  // the route's default
});

test("responses.create: a whole answer", async () => {
  const done = await client().responses.create({ model: "llama-3", input: "hi", max_output_tokens: 3 }, knobs({ tokens: 10 }));
  assert.equal(done.object, "response");
  assert.equal(done.output_text, "The quick brown");
  assert.equal(done.status, "incomplete");
  assert.equal(done.incomplete_details.reason, "max_output_tokens");
  assert.equal(done.usage.output_tokens, 3);
});

test("a tool-call loop: the call, its output sent back, the answer", async () => {
  const stream = client().responses.stream(
    { model: "llama-3", input: [{ role: "user", content: "Call the tool." }], tools },
    knobs({ tool_call: true, tokens: 5, interval_ms: 2 }),
  );
  let fragments = 0;
  for await (const event of stream) if (event.type === "response.function_call_arguments.delta") fragments++;
  const first = await stream.finalResponse();
  const call = first.output.find((item) => item.type === "function_call");
  assert.ok(call, JSON.stringify(first.output));
  assert.equal(call.name, "demo_tool");
  assert.deepEqual(JSON.parse(call.arguments), { text: "The quick brown fox jumps" });
  assert.equal(fragments, 5);
  // The whole answer says the same call; its output goes back, stateless.
  const whole = await client().responses.create(
    { model: "llama-3", input: [{ role: "user", content: "Call the tool." }], tools },
    knobs({ tool_call: true, tokens: 5 }),
  );
  assert.equal(whole.output[0].type, "function_call");
  const answer = await client().responses.create(
    {
      model: "llama-3",
      tools,
      input: [
        { role: "user", content: "Call the tool." },
        ...first.output,
        { type: "function_call_output", call_id: call.call_id, output: "done" },
      ],
    },
    knobs({ tokens: 2 }),
  );
  assert.equal(answer.output_text, "The quick");
  const messages = JSON.parse((await lastRequest()).body).messages;
  assert.equal(messages[1].role, "assistant");
  assert.equal(messages[1].tool_calls[0].id, call.call_id);
  assert.equal(messages[1].tool_calls[0].function.name, "demo_tool");
  assert.deepEqual(messages[2], { role: "tool", tool_call_id: call.call_id, content: "done" });
});

test("an engine that overruns the limit is cut: response.incomplete", async () => {
  const stream = client().responses.stream(
    { model: "llama-3", input: "hi", max_output_tokens: 3 },
    knobs({ tokens: 20, ignore_limit: true, interval_ms: 2 }),
  );
  let last;
  for await (const event of stream) last = event.type;
  const done = await stream.finalResponse();
  assert.equal(last, "response.incomplete");
  assert.equal(done.output_text, "The quick brown");
  assert.equal(done.status, "incomplete");
  assert.equal(done.incomplete_details.reason, "max_output_tokens");
  assert.equal(done.usage.output_tokens, 3);
});

test("what needs stored state is refused with a 400 naming it", async () => {
  const error = await client()
    .responses.create({ model: "llama-3", input: "hi", previous_response_id: "resp_1" })
    .catch((e) => e);
  assert.ok(error instanceof OpenAI.BadRequestError, `got ${error}`);
  assert.equal(error.code, "unsupported_parameter");
  assert.match(error.message, /previous_response_id/);
  const hosted = await client()
    .responses.create({ model: "llama-3", input: "hi", tools: [{ type: "web_search" }] })
    .catch((e) => e);
  assert.ok(hosted instanceof OpenAI.BadRequestError, `got ${hosted}`);
  assert.match(hosted.message, /web_search/);
});
