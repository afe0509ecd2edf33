// docs/approvals.md's executor check in TypeScript (JavaScript as written: the snippet
// has no type annotations), run against a real askgate from the installed package:
// the receipt of an approved deploy of tenant acme approves it once, and a replay of it
// runs nothing (RECEIPT_CONSUMED).

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { once } from "node:events";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { Client, action, question, select } from "@askgate/client";

import { Server, askgateOutput, eventually, tempDir, within } from "./support.mjs";

const PACKAGE = fileURLToPath(new URL("..", import.meta.url));
const DOCS = fileURLToPath(new URL("../../../docs/approvals.md", import.meta.url));
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** A code block of a doc (docs/approvals.md unless named), by the `<!-- snippet: NAME -->` line before it. */
function snippet(name, doc = DOCS) {
  const found = new RegExp(`<!-- snippet: ${name} -->\\n\`\`\`\\w*\\n([\\s\\S]*?)\`\`\``).exec(readFileSync(doc, "utf8"));
  assert.ok(found, `${doc} has no snippet ${name}`);
  return found[1];
}

/** Runs `code` as a module of the installed package's project, as a user would. */
function start(t, code, env) {
  const home = process.env.ASKGATE_NODE_INSTALL ?? PACKAGE;
  const script = join(home, `snippet-${process.pid}-${Math.random().toString(36).slice(2)}.mjs`);
  writeFileSync(script, code);
  t.after(() => rmSync(script, { force: true }));
  const child = spawn(process.execPath, [script], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  const output = { out: "", err: "" };
  child.stdout.on("data", (chunk) => (output.out += chunk));
  child.stderr.on("data", (chunk) => (output.err += chunk));
  const exited = once(child, "exit").then(([status]) => ({ status, ...output }));
  return { child, output, exited };
}

/** An asking snippet run as written, again while it fails NO_PROVIDER (its follower,
 * started just before, is not following yet); any other outcome is final. */
async function runUntilFollowed(t, code, env) {
  return await eventually("the snippet to be followed", async () => {
    const done = await within("the snippet", start(t, code, env).exited);
    return done.err.includes("NO_PROVIDER") ? undefined : done;
  });
}

test("the README's TypeScript quickstart runs as written", async (t) => {
  const server = await Server.start();
  t.after(() => server.stop());
  const bot = spawn(process.env.ASKGATE_BIN, ["bot", "--addr", server.addr, "--session", "demo", "--policy", "first"], {
    stdio: "ignore",
  });
  t.after(() => bot.kill());
  const done = await runUntilFollowed(t, snippet("quickstart-js", join(ROOT, "README.md")), { ASKGATE_ADDR: server.addr });
  assert.equal(done.status, 0, done.err);
  assert.match(done.out, /^\[ 'Postgres \(Recommended\)' \] by /);
});

test("docs/node.md's ask and follow snippets run together", async (t) => {
  const page = join(ROOT, "docs", "node.md");
  const server = await Server.start();
  t.after(() => server.stop());
  const env = { ASKGATE_ADDR: server.addr };
  const follower = start(t, snippet("node-follow", page), env);
  t.after(() => follower.child.kill());
  const done = await runUntilFollowed(t, `${snippet("node-ask", page)}\nconsole.log(JSON.stringify(result));\nclient.close();\n`, env);
  assert.equal(done.status, 0, done.err);
  const result = JSON.parse(done.out);
  assert.deepEqual(result.answers[0].selected, ["Postgres (Recommended)"]);
  assert.equal(follower.output.err, "", "the follower failed nothing");
});

test("the docs' executor check runs as written", async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  const keys = join(dir.path, "keys.json");
  const key = async (sub, roles) =>
    (await askgateOutput(["keys", "add", "--file", keys, "--tenant", "acme", "--sub", sub, "--roles", roles])).trim();
  const agent = await key("deployer", "agent");
  const ana = await key("ana", "ui");
  const pem = join(dir.path, "receipt.pem");
  writeFileSync(pem, generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
  const server = await Server.start(["--auth", "keys", "--keys-file", keys, "--receipt-key-file", pem]);
  t.after(() => server.stop());

  const asking = new Client({ addr: server.addr, token: agent });
  const human = new Client({ addr: server.addr, token: ana });
  t.after(() => {
    asking.close();
    human.close();
  });
  const call = asking.ask({
    sessionId: "s",
    questions: [question("go", "Deploy api to prod?", { options: ["Approve", "Reject"] })],
    hold: true,
    action: action("deploy", { service: "api", env: "prod" }),
  });
  const [pending] = await eventually("the ask", async () => {
    const listed = await human.listPending("s");
    return listed.length > 0 ? listed : undefined;
  });
  await human.answer("s", pending.rpcId, [select("go", "Approve")]);
  const { receipt } = await within("the ask", call);

  const home = process.env.ASKGATE_NODE_INSTALL ?? PACKAGE;
  const script = join(home, `executor-${process.pid}.mjs`);
  writeFileSync(script, snippet("executor-ts"));
  t.after(() => rmSync(script, { force: true }));
  const run = async () => {
    const child = spawn(process.execPath, [script], {
      env: { ...process.env, ASKGATE_ADDR: server.addr, ASKGATE_TOKEN: agent, RECEIPT: receipt },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (err += chunk));
    const [status] = await within("the snippet", once(child, "exit"));
    return { status, out, err };
  };
  const first = await run();
  assert.equal(first.status, 0, first.err);
  assert.match(first.out, /approved by \[ 'ana' \] asked by deployer/);
  const replay = await run();
  assert.notEqual(replay.status, 0);
  assert.match(replay.err, /RECEIPT_CONSUMED/);
});
