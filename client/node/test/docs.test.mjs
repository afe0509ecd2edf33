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

/** A code block of docs/approvals.md, by the `<!-- snippet: NAME -->` line before it. */
function snippet(name) {
  const found = new RegExp(`<!-- snippet: ${name} -->\\n\`\`\`\\w*\\n([\\s\\S]*?)\`\`\``).exec(readFileSync(DOCS, "utf8"));
  assert.ok(found, `docs/approvals.md has no snippet ${name}`);
  return found[1];
}

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
