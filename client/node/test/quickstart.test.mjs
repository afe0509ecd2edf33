// The package README's quickstart, run as written against a real askgate with a bot
// answering: from the packed tarball installed in a fresh project when test.sh made
// one (ASKGATE_NODE_INSTALL), else from this package by its own name.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { Server, startBot, within } from "./support.mjs";

const PACKAGE = fileURLToPath(new URL("..", import.meta.url));

test("the README quickstart runs", async (t) => {
  const readme = readFileSync(join(PACKAGE, "README.md"), "utf8");
  const code = /```ts\n([\s\S]*?)```/.exec(readme);
  assert.ok(code, "the README has a TypeScript quickstart");
  const server = await Server.start();
  t.after(() => server.stop());
  const bot = await startBot(server, "team-a/review");
  t.after(() => bot.stop());

  // Plain JavaScript as written (the quickstart has no type annotations).
  const dir = process.env.ASKGATE_NODE_INSTALL ?? PACKAGE;
  const script = join(dir, `quickstart-${process.pid}.mjs`);
  writeFileSync(script, code[1]);
  t.after(() => rmSync(script, { force: true }));
  const run = spawn(process.execPath, [script], {
    env: { ...process.env, ASKGATE_ADDR: server.addr },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  run.stdout.on("data", (chunk) => (out += chunk));
  run.stderr.on("data", (chunk) => (err += chunk));
  const [status] = await within("the quickstart", once(run, "exit"));
  assert.equal(status, 0, err);
  assert.equal(out.trim(), "[ 'Postgres (Recommended)' ] by anonymous");
});
