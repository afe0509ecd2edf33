// whoAmI, and the Slack admin calls against a real askgate posting to a fake Slack Web
// API here (it checks the bot token and records what askgate sends).

import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import { test } from "node:test";

import { AskgateError, Client, question } from "@askgate/client";

import { Server, eventually } from "./support.mjs";

const TOKEN = "xoxb-node-sdk";

/** A fake Slack Web API on 127.0.0.1: auth.test, chat.postMessage, chat.update. */
async function fakeSlack() {
  const calls = [];
  const server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      const method = request.url.replace("/api/", "");
      const authorized = request.headers.authorization === `Bearer ${TOKEN}`;
      calls.push({ method, body: JSON.parse(body || "null"), authorized });
      const reply = !authorized
        ? { ok: false, error: "invalid_auth" }
        : method === "auth.test"
          ? { ok: true, team_id: "T9" }
          : { ok: true, channel: "C1", ts: "1.000001" };
      response.setHeader("content-type", "application/json");
      response.end(JSON.stringify(reply));
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { url: `http://127.0.0.1:${server.address().port}/api`, calls, server };
}

test("whoAmI names the caller", async (t) => {
  const askgate = await Server.start();
  t.after(() => askgate.stop());
  const client = new Client({ addr: askgate.addr });
  t.after(() => client.close());
  const me = await client.whoAmI();
  assert.deepEqual(
    [me.tenant, me.subject, me.roles, me.everySession, me.sessions, me.expiresAt],
    ["default", "anonymous", ["agent", "ui", "admin"], true, [], undefined],
  );
});

test("a Slack app is connected, posts the tenant's questions, and is disconnected", async (t) => {
  const slack = await fakeSlack();
  t.after(() => slack.server.close());
  const askgate = await Server.start(["--slack-api-url", slack.url]);
  t.after(() => askgate.stop());
  const client = new Client({ addr: askgate.addr });
  t.after(() => client.close());

  await assert.rejects(
    client.connectSlack({ botToken: "xoxb-wrong", signingSecret: "s", channel: "C1" }),
    (e) => e instanceof AskgateError && e.reason === "BAD_REQUEST" && /invalid_auth/.test(e.message),
  );
  const app = await client.connectSlack({
    botToken: TOKEN,
    signingSecret: "signing",
    channel: "C1",
    sessionPrefix: "ops/",
    labels: { team: "infra" },
  });
  assert.equal(app.teamId, "T9");
  assert.equal(app.provides, true);
  assert.deepEqual((await client.listSlackApps()).map((a) => a.id), [app.id]);
  const shown = JSON.stringify(await client.listSlackApps(), (_, v) => (typeof v === "bigint" ? String(v) : v));
  assert.equal(shown.includes(TOKEN) || shown.includes("signing"), false, "no secret comes back");

  // The app provides for ops/ asks with its label: held for it, and posted.
  const asking = client
    .ask({ sessionId: "ops/1", questions: [question("q", "Restart?", { options: ["yes", "no"] })], labels: { team: "infra" } })
    .catch((e) => e);
  const posted = await eventually("the post", async () => slack.calls.find((c) => c.method === "chat.postMessage"));
  assert.equal(posted.authorized, true);
  assert.match(JSON.stringify(posted.body.blocks), /Restart\?/);

  await client.disconnectSlack(app.id);
  assert.deepEqual(await client.listSlackApps(), []);
  await assert.rejects(client.disconnectSlack(app.id), (e) => e.reason === "NOT_FOUND");
  const [pending] = await client.listPending("ops/1");
  await client.cancel("ops/1", pending.rpcId, "done");
  assert.equal((await asking).reason, "ASK_CANCELLED");
});
