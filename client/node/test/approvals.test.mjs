// Approvals against a real `askgate serve` (docs/approvals.md): a receipt verified with
// the server's published keys for its tenant, a tampered action, another tenant, another
// server's key, an expired receipt and a decision other than approved refused; a receipt
// consumed once; I-JSON arguments; default answers on expiry; the channels an ask allows.

import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { AskgateError, Client, action, custom, question, select } from "@askgate/client";
import { ReceiptError, actionDigest, checkReceipt, verifyReceipt } from "@askgate/client/receipts";

import { Server, eventually, tempDir, within } from "./support.mjs";

const DEPLOY = action("deploy", { service: "api", env: "prod", replicas: 3 });
/** The tenant of a server without authentication. */
const TENANT = { tenant: "default" };
const dir = tempDir();
let signing;
let stranger;

function keyFile(name) {
  const { privateKey } = generateKeyPairSync("ed25519");
  const path = join(dir.path, name);
  writeFileSync(path, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
  return path;
}

async function jwks(server) {
  const response = await fetch(`${server.addr}/.well-known/jwks.json`);
  assert.equal(response.status, 200);
  return response.json();
}

function ship(extra = {}) {
  return {
    sessionId: "s",
    questions: [question("go", "Deploy api to prod?", { options: ["Approve", "Reject"] })],
    hold: true,
    action: DEPLOY,
    ...extra,
  };
}

/** Asks, and answers with `label` (or cancels) once the ask is pending. */
async function resolved(server, ask, resolve) {
  const agent = new Client({ addr: server.addr });
  const ui = new Client({ addr: server.addr });
  try {
    const call = agent.ask(ask).catch((e) => e);
    const [pending] = await eventually("the ask", async () => {
      const listed = await ui.listPending(ask.sessionId);
      return listed.length > 0 ? listed : undefined;
    });
    await resolve(ui, pending.rpcId);
    return await within("the ask", call);
  } finally {
    agent.close();
    ui.close();
  }
}

before(async () => {
  signing = await Server.start(["--receipt-key-file", keyFile("a.pem"), "--receipt-ttl", "1s"]);
  stranger = await Server.start(["--receipt-key-file", keyFile("b.pem")]);
});

after(async () => {
  await signing.stop();
  await stranger.stop();
  dir.remove();
});

test("a receipt binds the answer to the action", async () => {
  const result = await resolved(signing, ship(), (ui, rpcId) =>
    ui.answer("s", rpcId, [select("go", "Approve")]),
  );
  assert.equal(result.resolution, "ANSWERED");
  assert.deepEqual(result.approvers, [result.resolvedBy]);
  const keys = await jwks(signing);
  const respelt = { name: "deploy", argumentsJson: '{ "replicas": 3, "env": "prod", "service": "api" }' };
  const claims = await verifyReceipt(result.receipt, keys, respelt, TENANT);
  assert.equal(claims.rpc_id, result.rpcId);
  assert.equal(claims.resolution, "ANSWERED");
  assert.equal(claims.decision, "approved");
  assert.equal(claims.asked_by, "anonymous");
  await assert.rejects(
    verifyReceipt(result.receipt, keys, DEPLOY, { tenant: "acme" }),
    (e) => e instanceof ReceiptError && e.kind === "wrong_tenant",
  );

  const tampered = action("deploy", { service: "api", env: "prod", replicas: 30 });
  await assert.rejects(verifyReceipt(result.receipt, keys, tampered, TENANT), (e) => e instanceof ReceiptError && e.kind === "wrong_action");
  await assert.rejects(
    verifyReceipt(result.receipt, await jwks(stranger), DEPLOY, TENANT),
    (e) => e instanceof ReceiptError && e.kind === "unknown_key",
  );
  const forged = await jwks(stranger);
  forged.keys[0].kid = keys.keys[0].kid;
  await assert.rejects(verifyReceipt(result.receipt, forged, DEPLOY, TENANT), (e) => e instanceof ReceiptError && e.kind === "bad_signature");

  // Valid for a second (--receipt-ttl 1s; timestamps are whole seconds).
  await new Promise((resolve) => setTimeout(resolve, 2100));
  await assert.rejects(
    verifyReceipt(result.receipt, keys, DEPLOY, { ...TENANT, leewayS: 0 }),
    (e) => e instanceof ReceiptError && e.kind === "expired",
  );
});

test("a cancelled ask's receipt is in the error", async () => {
  const error = await resolved(signing, ship(), (ui, rpcId) => ui.cancel("s", rpcId, "not today"));
  assert.ok(error instanceof AskgateError, String(error));
  assert.equal(error.reason, "ASK_CANCELLED");
  await assert.rejects(
    verifyReceipt(error.metadata.receipt, await jwks(signing), DEPLOY, TENANT),
    (e) => e instanceof ReceiptError && e.kind === "not_approved" && e.claims.decision === "cancelled",
  );
  const claims = await verifyReceipt(error.metadata.receipt, await jwks(signing), DEPLOY, { ...TENANT, anyDecision: true });
  assert.equal(claims.resolution, "CANCELLED");
});

test("only the approving answer approves, and a receipt runs its action once", async () => {
  const keys = await jwks(signing);
  const rejected = await resolved(signing, ship(), (ui, rpcId) => ui.answer("s", rpcId, [select("go", "Reject")]));
  await assert.rejects(
    verifyReceipt(rejected.receipt, keys, DEPLOY, TENANT),
    (e) => e instanceof ReceiptError && e.kind === "not_approved" && e.claims.decision === "rejected",
  );
  const approved = await resolved(signing, ship(), (ui, rpcId) => ui.answer("s", rpcId, [select("go", "Approve")]));
  const executor = new Client({ addr: signing.addr });
  try {
    const claims = await checkReceipt(executor, approved.receipt, keys, DEPLOY, TENANT);
    assert.equal(claims.decision, "approved");
    const replayed = await checkReceipt(executor, approved.receipt, keys, DEPLOY, TENANT).catch((e) => e);
    assert.ok(replayed instanceof AskgateError, String(replayed));
    assert.equal(replayed.reason, "RECEIPT_CONSUMED");
    assert.ok(replayed.metadata.consumed_at);
  } finally {
    executor.close();
  }
});

test("numbers a double would change have no digest and no ask", async () => {
  const agent = new Client({ addr: signing.addr });
  try {
    for (const argumentsJson of ['{"user_id": 1234567890123456789}', '{"amount": 0.1000000000000000000001}']) {
      assert.throws(() => actionDigest({ name: "pay", argumentsJson }), (e) => e instanceof ReceiptError && e.kind === "inexact");
      const refused = await agent
        .ask({ sessionId: "s", questions: [question("go", "Go?", { options: ["yes"] })], action: { name: "pay", argumentsJson } })
        .catch((e) => e);
      assert.equal(refused.reason, "BAD_REQUEST");
      assert.equal(refused.violations[0].field, "action.arguments_json");
    }
    assert.ok(actionDigest({ name: "pay", argumentsJson: '{"user_id": "1234567890123456789", "amount": 0.1, "n": 1e3}' }));
  } finally {
    agent.close();
  }
});

test("default answers apply when nobody answers", async () => {
  const agent = new Client({ addr: signing.addr });
  try {
    const result = await within("the ask", agent.ask(ship({ defaultAnswers: [select("go", "Reject")], ttlMs: 300 })));
    assert.equal(result.resolution, "DEFAULTED");
    assert.equal(result.resolvedBy, "askgate:default");
    assert.deepEqual(result.answers, [{ id: "go", selected: ["Reject"] }]);
    const claims = await verifyReceipt(result.receipt, await jwks(signing), DEPLOY, { ...TENANT, anyDecision: true });
    assert.equal(claims.resolution, "DEFAULTED");
    assert.equal(claims.decision, "defaulted");
    const expired = await within("the ask", agent.ask(ship({ ttlMs: 300 })).catch((e) => e));
    assert.equal(expired.reason, "ASK_EXPIRED");
  } finally {
    agent.close();
  }
});

test("only the allowed channels resolve an ask", async () => {
  const ops = new Client({ addr: signing.addr, channel: "ops" });
  const tui = new Client({ addr: signing.addr, channel: "tui" });
  try {
    const result = await resolved(signing, ship({ allowedChannels: ["tui"] }), async (_ui, rpcId) => {
      const refused = await ops.answer("s", rpcId, [select("go", "Approve")]).catch((e) => e);
      assert.equal(refused.reason, "CHANNEL_NOT_ALLOWED");
      await tui.answer("s", rpcId, [select("go", "Approve")]);
    });
    assert.deepEqual(result.answers, [{ id: "go", selected: ["Approve"] }]);
  } finally {
    ops.close();
    tui.close();
  }
});

test("only the approvers answer an ask", async () => {
  const theirs = await resolved(signing, ship({ approvers: { subjects: ["ana"] } }), async (ui, rpcId) => {
    const [pending] = await ui.listPending("s");
    assert.deepEqual(pending.approvers?.subjects, ["ana"]);
    const refused = await ui.answer("s", rpcId, [select("go", "Approve")]).catch((e) => e);
    assert.ok(refused instanceof AskgateError);
    assert.equal(refused.reason, "NOT_AN_APPROVER");
    assert.equal(refused.metadata.approvers, "ana");
    await ui.cancel("s", rpcId, "not mine");
  });
  assert.equal(theirs.reason, "ASK_CANCELLED");
  const mine = await resolved(signing, ship({ approvers: { subjects: ["Anonymous"] } }), async (ui, rpcId) => {
    await ui.answer("s", rpcId, [select("go", "Approve")]);
  });
  assert.equal(mine.resolvedBy, "anonymous");
});

test("a secret answer reaches the asker only", async () => {
  const secret = "zq7731-node-secret";
  const agent = new Client({ addr: signing.addr });
  const ui = new Client({ addr: signing.addr });
  const stop = new AbortController();
  try {
    const events = ui.follow({ sessionId: "secret", signal: stop.signal });
    assert.equal((await within("synced", events.next())).value.kind, "synced");
    const call = agent.ask({
      sessionId: "secret",
      questions: [
        question("code", "The one-time code?", { secret: true }),
        question("go", "Rotate the key?", { options: ["yes", "no"] }),
      ],
      hold: true,
    });
    const requested = (await within("the ask", events.next())).value;
    assert.equal(requested.kind, "requested");
    assert.ok(requested.requested.questions[0].secret);
    await ui.answer("secret", requested.requested.rpcId, [custom("code", secret), select("go", "yes")]);
    let event;
    do {
      event = (await within("the resolution", events.next())).value;
    } while (event.kind !== "resolved");
    // The follower gets the other answers only; the asker gets them all, in order.
    assert.deepEqual(event.resolved.answers.map((a) => a.id), ["go"]);
    assert.equal(event.resolved.sealedAnswers, "");
    assert.ok(!JSON.stringify(event.resolved, (_, v) => (typeof v === "bigint" ? String(v) : v)).includes(secret));
    const result = await within("the answer", call);
    assert.deepEqual(result.answers.map((a) => a.id), ["code", "go"]);
    assert.equal(result.answers[0].custom, secret);
  } finally {
    stop.abort();
    agent.close();
    ui.close();
  }
});

test("people are put, listed and removed; a person asks for a link code", async () => {
  const admin = new Client({ addr: signing.addr });
  try {
    const until = new Date(Date.now() + 3_600_000);
    const put = await admin.putPerson({
      id: "ana",
      displayName: "Ana Lima",
      groups: ["sre"],
      // The caller of a server without authentication is `anonymous`: Ana, here.
      identities: [
        { kind: "subject", value: "anonymous" },
        { kind: "slack", value: "T1/U2" },
      ],
      delegate: { toPerson: "bo", until },
    });
    assert.equal(put.displayName, "Ana Lima");
    assert.deepEqual(
      put.identities.map(({ kind, value }) => [kind, value]),
      [
        ["subject", "anonymous"],
        ["slack", "t1/u2"],
      ],
    );
    assert.equal(Number(put.delegate?.until?.seconds), Math.floor(until.getTime() / 1000));
    assert.deepEqual(
      (await admin.listPeople()).map((p) => p.id),
      ["ana"],
    );
    const code = await admin.startLink();
    assert.match(code.code, /^[A-Z0-9]{8}$/);
    // This server mails nothing: a mailed link is refused, saying what it lacks.
    const refused = await admin.startLink({ email: "ana@example.com" }).catch((e) => e);
    assert.ok(refused instanceof AskgateError, String(refused));
    assert.equal(refused.reason, "PERMISSION_DENIED");
    assert.match(refused.message, /--public-url|--smtp-url/);
    await admin.deletePerson("ana");
    assert.deepEqual(await admin.listPeople(), []);
    const gone = await admin.deletePerson("ana").catch((e) => e);
    assert.equal(gone.reason, "NOT_FOUND");
  } finally {
    admin.close();
  }
});

const POLICIES = `
@id("staging") @decision("allow")
permit(principal, action == Action::"deploy", resource)
when { context.arguments has env && context.arguments.env == "staging" };

@id("prod-freeze") @reason("prod is frozen until Monday")
forbid(principal, action == Action::"deploy", resource)
when { context.arguments has env && context.arguments.env == "prod" };
`;

test("the tenant's policy allows and denies before anyone is asked", async () => {
  const server = await Server.start(["--receipt-key-file", keyFile("p.pem")]);
  try {
    const client = new Client({ addr: server.addr });
    const stored = await client.putPolicies(POLICIES);
    assert.equal(stored.version, 1n);
    assert.deepEqual(stored.policyIds, ["staging", "prod-freeze"]);
    const staging = action("deploy", { service: "api", env: "staging" });
    const ask = {
      sessionId: "s",
      questions: [question("go", "Deploy api to staging?", { options: ["Approve", "Reject"] })],
      action: staging,
    };
    const tested = await client.testPolicies(ask);
    assert.deepEqual([tested.decision, tested.policyIds], ["allow", ["staging"]]);
    // Nobody follows the session and the ask is not held: only the policy answers.
    const result = await client.ask(ask);
    assert.equal(result.resolution, "ALLOWED_BY_POLICY");
    assert.deepEqual(result.approvers, ["policy:staging"]);
    const claims = await verifyReceipt(result.receipt, await jwks(server), staging, TENANT);
    assert.equal(claims.decision, "approved");
    await assert.rejects(client.ask(ship()), (e) => {
      assert.ok(e instanceof AskgateError);
      assert.equal(e.reason, "DENIED_BY_POLICY");
      assert.equal(e.metadata.policy, "prod-freeze");
      assert.equal(e.metadata.reason, "prod is frozen until Monday");
      return true;
    });
    await assert.rejects(
      client.putPolicies("permit(principal, action, resource);"),
      (e) => e instanceof AskgateError && e.reason === "BAD_REQUEST",
    );
    assert.equal((await client.getPolicies()).version, 1n);
    client.close();
  } finally {
    await server.stop();
  }
});
