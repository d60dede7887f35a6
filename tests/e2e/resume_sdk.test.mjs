// Streams that outlive their upstream, read by the official SDKs: the demo
// engine cuts, errors or stalls a stream mid-answer once, and tokengate
// resumes it (restart and prefill), so that the SDK reads the unfailed
// answer once, in order, with one finish and one answer's usage. Where no
// resume is honest (a new attempt whose text differs, a tool call cut in
// its arguments) the SDK raises the stream's error event instead.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startProxy } from "./harness.mjs";

const idleMs = 1000;
const routes = [
  "routes:",
  "  - {name: restart, models: [restart], targets: [{upstream: demo, model: demo}],",
  "     retry_backoff: 1ms, resume: {mode: restart}}",
  "  - {name: prefill, models: [prefill], targets: [{upstream: demo, model: demo}],",
  "     retry_backoff: 1ms, resume: {mode: prefill}}",
];
let proxy;
before(async () => {
  proxy = await startProxy({ topYaml: routes, upstreamYaml: [`    timeouts: {idle: ${idleMs}ms}`] });
});
after(async () => {
  await proxy?.stop();
});

const openai = () => new OpenAI({ baseURL: proxy.baseURL, apiKey: "k", maxRetries: 0 });
const anthropic = () =>
  new Anthropic({ baseURL: proxy.baseURL.replace(/\/v1$/, ""), apiKey: "k", maxRetries: 0 });
// Each test's knobs carry its own name: the engine counts a fault's
// `fail_times` per set of knobs.
const knobs = (o) => ({ headers: { "x-demo": JSON.stringify(o) } });
const answer = { tokens: 60, interval_ms: 1, ttft_ms: 0 };

async function chatStream(model, demo) {
  const stream = await openai().chat.completions.create(
    {
      model,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "hi" }],
    },
    knobs(demo),
  );
  const got = { text: "", finishes: [], usage: undefined, ids: new Set() };
  for await (const chunk of stream) {
    got.ids.add(chunk.id);
    if (chunk.choices[0]?.delta?.content) got.text += chunk.choices[0].delta.content;
    if (chunk.choices[0]?.finish_reason) got.finishes.push(chunk.choices[0].finish_reason);
    if (chunk.usage) got.usage = chunk.usage;
  }
  return got;
}

async function messagesStream(model, demo) {
  const stream = anthropic().messages.stream(
    { model, max_tokens: 300, messages: [{ role: "user", content: "hi" }] },
    knobs(demo),
  );
  let text = "";
  stream.on("text", (t) => (text += t));
  const message = await stream.finalMessage();
  return { text, message };
}

for (const mode of ["restart", "prefill"]) {
  test(`openai SDK: a chat stream cut at token 40 of 60 is the whole answer once (${mode})`, async () => {
    const unfailed = await chatStream(mode, { ...answer, run: `${mode}-chat-unfailed` });
    assert.equal(unfailed.usage.completion_tokens, 60);
    const got = await chatStream(mode, { ...answer, run: `${mode}-chat-cut`, reset_after: 40, fail_times: 1 });
    assert.equal(got.text, unfailed.text);
    assert.deepEqual(got.finishes, ["stop"]);
    assert.equal(got.usage.completion_tokens, 60, "the completion the client received, once");
    assert.equal(got.ids.size, 1, "one stream, one id");
  });

  test(`anthropic SDK: a message stream cut at token 40 of 60 is the whole answer once (${mode})`, async () => {
    const unfailed = await messagesStream(mode, { ...answer, run: `${mode}-msg-unfailed` });
    const got = await messagesStream(mode, { ...answer, run: `${mode}-msg-cut`, error_after: 40, fail_times: 1 });
    assert.equal(got.text, unfailed.text);
    assert.equal(got.message.content.length, 1);
    assert.equal(got.message.content[0].text, unfailed.text);
    assert.equal(got.message.stop_reason, "end_turn");
    assert.equal(got.message.usage.output_tokens, 60);
  });
}

test("openai SDK: a target that refuses the prefill is restarted, and the answer completes", async () => {
  const unfailed = await chatStream("prefill", { ...answer, run: "refused-unfailed" });
  const got = await chatStream("prefill", {
    ...answer, run: "refused-cut", reset_after: 40, fail_times: 1, refuse_prefill: true,
  });
  assert.equal(got.text, unfailed.text);
  assert.deepEqual(got.finishes, ["stop"]);
});

test("openai SDK: a stream stalled after 20 tokens resumes within the idle timeout and one attempt", async () => {
  const unfailed = await chatStream("restart", { ...answer, run: "stall-unfailed" });
  const start = Date.now();
  const got = await chatStream("restart", { ...answer, run: "stall-cut", stall_after: 20, fail_times: 1 });
  const took = Date.now() - start;
  assert.equal(got.text, unfailed.text);
  assert.ok(took < idleMs + 1000, `${took} ms: the idle timeout, then one attempt`);
});

test("openai SDK: a restart whose text differs ends in the stream's error, never a spliced answer", async () => {
  let tokens = 0;
  await assert.rejects(async () => {
    const stream = await openai().chat.completions.create(
      { model: "restart", stream: true, messages: [{ role: "user", content: "hi" }] },
      knobs({ ...answer, run: "vary", reset_after: 40, fail_times: 1, vary_text: true }),
    );
    for await (const chunk of stream) tokens += chunk.choices[0]?.delta?.content ? 1 : 0;
  }, /could not be resumed/);
  assert.equal(tokens, 40, "the 40 tokens sent, nothing after them");
});

test("openai SDK: a tool call cut in its arguments ends in an error, never malformed arguments", async () => {
  let args = "", finish;
  await assert.rejects(async () => {
    const stream = await openai().chat.completions.create(
      {
        model: "restart",
        stream: true,
        messages: [{ role: "user", content: "hi" }],
        tools: [{ type: "function", function: { name: "demo_tool", parameters: { type: "object" } } }],
      },
      knobs({ ...answer, run: "tool", tool_call: true, reset_after: 20, fail_times: 1 }),
    );
    for await (const chunk of stream) {
      args += chunk.choices[0]?.delta?.tool_calls?.[0]?.function?.arguments ?? "";
      if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
    }
  });
  assert.equal(finish, undefined, "no finish: the call is not presented as complete");
  assert.throws(() => JSON.parse(args), "the partial arguments are no JSON document to act on");
});

test("openai SDK: a Responses stream cut mid-answer completes with one response", async () => {
  const run = async (demo) => {
    const stream = await openai().responses.create({ model: "restart", stream: true, input: "hi" }, knobs(demo));
    let text = "", completed, sequence = [];
    for await (const event of stream) {
      sequence.push(event.sequence_number);
      if (event.type === "response.output_text.delta") text += event.delta;
      if (event.type === "response.completed") completed = event.response;
    }
    return { text, completed, sequence };
  };
  const unfailed = await run({ ...answer, run: "responses-unfailed" });
  const got = await run({ ...answer, run: "responses-cut", reset_after: 40, fail_times: 1 });
  assert.equal(got.text, unfailed.text);
  assert.equal(got.completed.output_text ?? got.completed.output[0].content[0].text, unfailed.text);
  assert.deepEqual(got.sequence, got.sequence.map((_, i) => i), "sequence numbers without a gap or a repeat");
});
