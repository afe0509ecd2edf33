// The model-facing tool against a real askgate: the server's definition, the fixed
// texts, and an abort that resolves the ask at once.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { test } from "node:test";

import { Client, Resolution, select } from "@askgate/client";
import {
  AskUserQuestion,
  anthropicTool,
  inputSchema,
  NAME,
  DESCRIPTION,
  openaiResponsesTool,
  openaiTool,
} from "@askgate/client/tool";

import { ASKGATE, Server, within } from "./support.mjs";

const DATABASE = {
  questions: [{ id: "db", question: "Which database?", options: [{ label: "Postgres" }, { label: "SQLite" }] }],
};

/** `tools/list` of `askgate mcp`: the definition the Rust SDK and every MCP client see. */
async function mcpTools() {
  const mcp = spawn(ASKGATE, ["mcp", "--session", "s"], { stdio: ["pipe", "pipe", "ignore"] });
  const lines = createInterface({ input: mcp.stdout })[Symbol.asyncIterator]();
  const send = (message) => mcp.stdin.write(`${JSON.stringify(message)}\n`);
  try {
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "0" } },
    });
    await within("initialize", lines.next());
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
    const listed = await within("tools/list", lines.next());
    return JSON.parse(listed.value).result.tools;
  } finally {
    const exited = once(mcp, "exit");
    mcp.kill("SIGKILL");
    await exited;
  }
}

// What the description tells the model about asking well: the same sentences as the
// Rust SDK's and the Python SDK's tests pin in service/contract/ask_user_question.json.
const GUIDANCE = [
  "Ask everything you need in one call.",
  "Keep each question short and specific.",
  "Prefer options (2 to 4, each with a short description of what it means) over open " +
    "questions; the user can always answer in their own words instead.",
  'To recommend an option, put it first and end its label with " (Recommended)"',
];

test("the tool description tells the model how to ask", () => {
  for (const sentence of GUIDANCE) {
    assert.ok(DESCRIPTION.includes(sentence), sentence);
  }
});

test("the tool definition is the server's, in every shape", async () => {
  const server = (await mcpTools()).find((t) => t.name === "ask_user_question");
  assert.deepEqual(
    { name: NAME, description: DESCRIPTION, schema: inputSchema() },
    { name: server.name, description: server.description, schema: server.inputSchema },
  );
  assert.equal(inputSchema().additionalProperties, false);
  assert.deepEqual(anthropicTool(), { name: NAME, description: DESCRIPTION, input_schema: inputSchema() });
  assert.deepEqual(openaiTool(), {
    type: "function",
    function: { name: NAME, description: DESCRIPTION, parameters: inputSchema() },
  });
  assert.deepEqual(openaiResponsesTool(), {
    type: "function",
    name: NAME,
    description: DESCRIPTION,
    parameters: inputSchema(),
    strict: false,
  });
});

/** A server, a client of it, and that client following session "s" (synced). */
async function following(t) {
  const server = await Server.start();
  t.after(() => server.stop());
  const client = new Client({ addr: server.addr });
  t.after(() => client.close());
  const stop = new AbortController();
  t.after(() => stop.abort());
  const ui = client.follow({ sessionId: "s", signal: stop.signal });
  assert.equal((await within("synced", ui.next())).value.kind, "synced");
  return { client, ui };
}

test("the tool returns the fixed texts and aborts at once", async (t) => {
  const { client, ui } = await following(t);
  const tool = new AskUserQuestion(client, "s");

  const answered = tool.run(JSON.stringify(DATABASE));
  const requested = (await within("requested", ui.next())).value;
  assert.equal(requested.kind, "requested");
  await client.answer("s", requested.requested.rpcId, [select("db", "Postgres")]);
  assert.deepEqual(await answered, { text: '{"answers":[{"id":"db","selected":["Postgres"]}]}' });
  assert.equal((await within("resolved", ui.next())).value.kind, "resolved");

  for (const nothing of ["{}", '{"questions": []}', {}]) {
    const output = await tool.run(nothing);
    assert.equal(output.text, "Error: ask_user_question requires at least one question");
    assert.equal(output.error.reason, "EMPTY_QUESTIONS");
  }
  const unknown = await tool.run({
    questions: [{ id: "a", question: "Q?", options: [{ label: "x", value: 1 }] }],
  });
  assert.match(unknown.text, /^Error: invalid arguments: questions\[0\]\.options\[0\]\.value: unknown field `value`/);
  assert.equal(unknown.error.reason, "BAD_REQUEST");
  const nobody = await new AskUserQuestion(client, "nobody").run(DATABASE);
  assert.equal(nobody.text, "Error: no user-questions provider is registered");
  assert.equal(nobody.error.reason, "NO_PROVIDER");

  const interrupted = new AbortController();
  const aborting = tool.run(DATABASE, { signal: interrupted.signal });
  assert.equal((await within("requested", ui.next())).value.kind, "requested");
  interrupted.abort();
  const output = await within("the aborted tool call", aborting);
  assert.equal(output.text, "Error: ask_user_question was aborted before the user answered");
  assert.equal(output.error.reason, "ASK_ABORTED");
  const resolved = (await within("resolved", ui.next())).value;
  assert.equal(Resolution[resolved.resolved.reason], "ABORTED");
  assert.deepEqual(await client.listPending("s"), [], "aborted at once, not after the grace");
});

test("the tool's action becomes the ask's action", async (t) => {
  const { client, ui } = await following(t);
  const tool = new AskUserQuestion(client, "s");
  const args = {
    questions: [{ id: "run", question: "Run it?", options: [{ label: "Run" }, { label: "Skip" }] }],
    action: { name: "Bash", arguments: { command: "make test" } },
  };
  const answered = tool.run(args);
  const requested = (await within("requested", ui.next())).value.requested;
  assert.equal(requested.action.name, "Bash");
  assert.deepEqual(JSON.parse(requested.action.argumentsJson), { command: "make test" });
  await client.answer("s", requested.rpcId, [select("run", "Run")]);
  assert.deepEqual(await answered, { text: '{"answers":[{"id":"run","selected":["Run"]}]}' });
  const refused = await tool.run({ ...args, action: { tool: "Bash" } });
  assert.match(refused.text, /^Error: invalid arguments: action\.tool: unknown field/);
});

// However the abort falls against the ask's registration (before the Ask is sent,
// racing it, or once it is pending), when the tool reports ASK_ABORTED nothing is left
// for a human to answer.
test("an aborted tool run leaves nothing answerable, before, during or after registration", async (t) => {
  const { client, ui } = await following(t);
  const tool = new AskUserQuestion(client, "s");
  for (const when of ["before", "during", "after"]) {
    const interrupted = new AbortController();
    if (when === "before") {
      interrupted.abort();
    } else if (when === "during") {
      setImmediate(() => interrupted.abort());
    }
    const aborting = tool.run(DATABASE, { signal: interrupted.signal });
    if (when === "after") {
      assert.equal((await within("requested", ui.next())).value.kind, "requested");
      interrupted.abort();
    }
    const output = await within(`the tool call aborted ${when}`, aborting);
    assert.equal(output.text, "Error: ask_user_question was aborted before the user answered", when);
    assert.deepEqual(await client.listPending("s"), [], `${when}: pending after the tool said ASK_ABORTED`);
  }
});
