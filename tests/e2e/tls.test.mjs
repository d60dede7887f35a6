// The official `openai` package over HTTPS: tokengate terminates TLS with a
// certificate made here, and past the handshake OpenSSL reads and writes
// the socket itself (proxy/io/tls_direct.hpp). Node's own TLS stack is
// the client, with its own habits (its first request, keep-alive, close).
// Node reads extra trusted certificates only at start-up
// (NODE_EXTRA_CA_CERTS), so the SDK runs in a child process of its own.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { makeCertificate, startProxy } from "./harness.mjs";

let proxy;
let dir;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "tokengate-e2e-tls-"));
  proxy = await startProxy({ tls: makeCertificate(dir) });
});
after(async () => {
  if (proxy) await proxy.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// Three streamed answers on one client (kept-alive connections), each
// reported as text, finish reason and chunk count.
const streamThreeTimes = `
import OpenAI from "openai";
const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: "client-key", maxRetries: 0 });
const out = [];
for (const max_tokens of [3, 30, 6]) {
  const stream = await client.chat.completions.create({
    model: "demo", stream: true, max_tokens, messages: [{ role: "user", content: "Say something." }],
  });
  let text = "", finish = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    text += chunk.choices[0]?.delta?.content ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  out.push({ text, finish, chunks });
}
console.log(JSON.stringify(out));
`;

test("openai SDK streams chat completions over TLS, one after another", () => {
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", streamThreeTimes], {
    cwd: dirname(fileURLToPath(import.meta.url)),
    env: { ...process.env, BASE_URL: proxy.baseURL, NODE_EXTRA_CA_CERTS: join(dir, "cert.pem") },
    encoding: "utf8",
    timeout: 30000,
  });
  assert.equal(child.status, 0, child.stderr);
  const answers = JSON.parse(child.stdout);
  assert.deepEqual(answers.map((a) => a.finish), ["length", "length", "length"]);
  assert.equal(answers[0].text, "The quick brown");
  assert.equal(answers[2].text, "The quick brown fox jumps over");
  assert.equal(answers[1].text, "The quick brown fox jumps over the lazy dog while the proxy relays every token " +
    "as soon as it is decoded, without delay.The quick brown fox jumps over");
  assert.ok(answers[1].chunks >= 31, `expected a chunk a token, got ${answers[1].chunks}`);
});
