// The Webhooks admin calls against a real askgate, with a receiver here that verifies
// each delivery with the Standard Webhooks reference library for TypeScript.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { once } from "node:events";
import { test } from "node:test";

import { AskgateError, Client, DeliveryStatus, question } from "@askgate/client";
import { Webhook } from "standardwebhooks";

import { Server, eventually, within } from "./support.mjs";

/** An HTTP receiver on 127.0.0.1 that records every request and answers 204. */
async function receiver() {
  const received = [];
  const server = createServer((request, response) => {
    let body = "";
    request.setEncoding("utf8");
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      received.push({ headers: request.headers, body });
      response.writeHead(204).end();
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { url: `http://127.0.0.1:${server.address().port}/hook`, received, server };
}

test("webhook endpoints are created, deliver signed events, and are listed and removed", async (t) => {
  const askgate = await Server.start(["--webhook-allow-private"]);
  t.after(() => askgate.stop());
  const hook = await receiver();
  t.after(() => hook.server.close());
  const client = new Client({ addr: askgate.addr });
  t.after(() => client.close());

  const endpoint = await client.createEndpoint({
    url: hook.url,
    events: ["ask.requested"],
    labels: { team: "infra" },
  });
  assert.match(endpoint.secret, /^whsec_/);
  assert.deepEqual(endpoint.events, ["ask.requested"]);
  assert.equal(endpoint.provides, true);
  const listed = await client.listEndpoints();
  assert.deepEqual(
    listed.map((e) => [e.id, e.secret]),
    [[endpoint.id, ""]],
    "the secret is shown once",
  );

  // Nobody follows "s": the endpoint provides, so the ask is held for it.
  const asking = client
    .ask({ sessionId: "s", questions: [question("q", "Deploy?")], labels: { team: "infra" } })
    .catch((e) => e);
  const [delivery] = await eventually("the delivery", async () => hook.received.length === 1 && hook.received);
  const event = new Webhook(endpoint.secret).verify(delivery.body, delivery.headers);
  assert.equal(event.type, "ask.requested");
  assert.equal(event.data.sessionId, "s");
  assert.equal(event.data.labels.team, "infra");

  const delivered = await eventually("the delivery listed", async () => {
    const list = await client.listDeliveries({ endpointId: endpoint.id, status: DeliveryStatus.DELIVERED });
    return list.length === 1 && list;
  });
  assert.equal(delivered[0].id, delivery.headers["webhook-id"]);
  assert.equal(delivered[0].attempts, 1);
  await client.cancel("s", event.data.rpcId, "done");
  assert.equal((await within("the ask", asking)).reason, "ASK_CANCELLED");

  await client.deleteEndpoint(endpoint.id);
  for (const call of [() => client.deleteEndpoint(endpoint.id), () => client.redeliver("msg_missing")]) {
    const error = await call().catch((e) => e);
    assert.ok(error instanceof AskgateError, String(error));
    assert.equal(error.reason, "NOT_FOUND");
  }
  const refused = await client.createEndpoint({ url: "ftp://example.com/x" }).catch((e) => e);
  assert.equal(refused.reason, "BAD_REQUEST");
});
