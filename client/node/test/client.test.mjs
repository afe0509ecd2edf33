// The client beyond the shared scenarios: its reasons, its retry budget, closing, and
// its secrecy.

import assert from "node:assert/strict";
import { createServer } from "node:net";
import { once } from "node:events";
import { inspect } from "node:util";
import { test } from "node:test";

import { AskgateError, Client, Code, REASONS, question } from "@askgate/client";
import { ErrorReasonSchema } from "@askgate/client/proto";

import { Server, eventually, within } from "./support.mjs";

const ASK = { sessionId: "s", questions: [question("db", "Which?", { options: ["a"] })] };

test("the reasons are the proto's", () => {
  assert.deepEqual(
    [...REASONS],
    ErrorReasonSchema.values.map((v) => v.name),
  );
});

test("retries stop at the retry budget", async () => {
  const closed = createServer();
  closed.listen(0, "127.0.0.1");
  await once(closed, "listening");
  const addr = `http://127.0.0.1:${closed.address().port}`;
  closed.close();
  const client = new Client({ addr });
  try {
    const error = await within("the retry budget", client.ask({ ...ASK, retryForMs: 500 }).catch((e) => e));
    assert.ok(error instanceof AskgateError, String(error));
    assert.equal(error.code, Code.Unavailable);
    assert.ok(error.retryable);
    // A person is told where it looked, and what to check.
    const hint = `cannot reach askgate at ${addr}: is \`askgate serve\` running there?`;
    assert.equal(error.hint, hint);
    assert.ok(error.message.endsWith(`(hint: ${hint})`), error.message);
  } finally {
    client.close();
  }
});

test("NO_PROVIDER keeps its text and hints at the next step", async (t) => {
  const server = await Server.start();
  t.after(() => server.stop());
  const client = new Client({ addr: server.addr });
  try {
    const error = await client.ask({ ...ASK, sessionId: "team-a/review" }).catch((e) => e);
    assert.ok(error instanceof AskgateError, String(error));
    assert.equal(error.reason, "NO_PROVIDER");
    assert.equal(error.rawMessage, "no user-questions provider is registered", "the seed's text");
    assert.equal(
      error.hint,
      "nobody follows session team-a/review: start `askgate answer --session team-a/review` " +
        `(or open the console at ${server.addr}/console/#/sessions/team-a/review) first, or ask ` +
        "with hold: true to wait until someone does",
    );
  } finally {
    client.close();
  }
});

test("closing the client ends its calls at once, without retrying them", async (t) => {
  const server = await Server.start();
  t.after(() => server.stop());
  const client = new Client({ addr: server.addr });
  const waiting = client.ask({ ...ASK, hold: true }).catch((e) => e);
  await eventually("the ask to be pending", async () => (await client.listPending("s")).length === 1);
  const stop = new AbortController();
  const following = client.follow({ sessionId: "s", signal: stop.signal });
  assert.equal((await within("a replayed ask", following.next())).value.kind, "requested");
  client.close();
  const error = await within("the ask to end", waiting);
  assert.ok(error instanceof AskgateError, String(error));
  assert.equal(error.code, Code.Canceled);
  // Events already received may still come; then the iteration ends.
  await within("the follow to end", (async () => {
    while (!(await following.next()).done) {
      // drained
    }
  })());
});

test("an aborted signal drops the ask with the signal's reason", async (t) => {
  const server = await Server.start();
  t.after(() => server.stop());
  const client = new Client({ addr: server.addr });
  t.after(() => client.close());
  const interrupted = new AbortController();
  const waiting = client.ask({ ...ASK, hold: true, signal: interrupted.signal }).catch((e) => e);
  await eventually("the ask to be pending", async () => (await client.listPending("s")).length === 1);
  const why = new Error("the turn ended");
  interrupted.abort(why);
  assert.equal(await within("the ask to end", waiting), why);
});

test("the token never shows", () => {
  const client = new Client({ addr: "http://127.0.0.1:1", token: "agk_secret" });
  try {
    assert.doesNotMatch(String(client), /agk_secret/);
    assert.doesNotMatch(inspect(client), /agk_secret/);
    assert.match(inspect(client), /redacted/);
  } finally {
    client.close();
  }
});
