// The shared scenarios (tests/scenarios/scenarios.json), run by this SDK against a
// real askgate: the same list the Rust and Python clients run.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { AskgateError, Client, Resolution, question as buildQuestion, option } from "@askgate/client";

import { Proxy, Server, askgateOutput, eventually, tempDir, within } from "./support.mjs";

const SCENARIOS = JSON.parse(
  readFileSync(new URL("../../../tests/scenarios/scenarios.json", import.meta.url), "utf8"),
);

function questionOf(q) {
  return buildQuestion(q.id, q.question, {
    header: q.header,
    detail: q.detail,
    options: (q.options ?? []).map((label) => option(label)),
    multiSelect: q.multi_select ?? false,
    planReview: q.plan_review,
  });
}

function answerOf(a) {
  return { $typeName: "askgate.v1.QuestionAnswer", id: a.id, selected: a.selected ?? [], custom: a.custom };
}

function expectAnswers(actual, expected) {
  assert.deepEqual(
    actual,
    expected.map((a) => (a.custom === undefined ? { id: a.id, selected: a.selected } : { ...a })),
  );
}

/** Checks that `thrown` is the askgate error `expected` describes. */
function expectError(thrown, expected, what) {
  assert.ok(thrown instanceof AskgateError, `${what}: not an AskgateError: ${thrown}`);
  assert.equal(thrown.reason, expected.reason, `${what}: ${thrown.message}`);
  assert.equal(thrown.code, SCENARIOS.codes[expected.code], `${what}: the code of ${thrown.message}`);
  for (const [key, value] of Object.entries(expected.metadata ?? {})) {
    assert.equal(thrown.metadata[key], value, `${what}: metadata ${key} of ${JSON.stringify(thrown.metadata)}`);
  }
  if (expected.violations) {
    assert.deepEqual(
      thrown.violations.map((v) => v.field),
      expected.violations,
    );
  }
}

/** Runs `call`, expecting it to succeed, or to fail as `step.error` says. */
async function expectOutcome(step, what, call) {
  let thrown;
  try {
    await within(what, call());
  } catch (e) {
    thrown = e;
  }
  if (step.error) {
    expectError(thrown, step.error, what);
  } else if (thrown) {
    throw thrown;
  }
}

class Run {
  constructor(server, proxy, keys) {
    this.server = server;
    this.proxy = proxy;
    this.keys = keys;
    this.clients = new Map();
    this.asks = new Map();
    this.follows = new Map();
    this.leases = new Map();
    this.stop = new AbortController();
  }

  client(step) {
    const via = step.via ?? "direct";
    const name = `${step.key ?? ""}@${via}#${step.channel ?? ""}`;
    if (!this.clients.has(name)) {
      const addr = via === "proxy" ? this.proxy.addr : this.server.addr;
      const token = step.key ? this.keys[step.key] : undefined;
      this.clients.set(name, new Client({ addr, token, channel: step.channel }));
    }
    return this.clients.get(name);
  }

  /** The rpc_ids the scenario knows by name. */
  bound() {
    return new Set([...this.asks.values()].map((a) => a.rpcId).filter(Boolean));
  }

  async step(step) {
    if (step.do === "ask") {
      const lease = step.lease ? this.leases.get(step.lease) : undefined;
      const agent = lease ? { agentId: lease.agentId, incarnation: lease.lease.incarnation } : step.agent;
      const ask = {
        session: step.session,
        key: step.key,
        requestId: step.request_id ?? randomUUID(),
      };
      ask.result = this.client(step)
        .ask({
          sessionId: step.session,
          questions: step.questions.map(questionOf),
          hold: step.hold ?? false,
          timeoutMs: step.timeout_ms,
          requestId: ask.requestId,
          agent: agent && { agentId: agent.agentId ?? agent.agent_id, incarnation: agent.incarnation },
          notify: step.notify && {
            remindAfterMs: step.notify.remind_after_ms,
            remindEveryMs: step.notify.remind_every_ms,
            maxReminders: step.notify.max_reminders,
            escalateAfterMs: step.notify.escalate_after_ms,
          },
          allowedChannels: step.allowed_channels,
          approvers: step.approvers,
          defaultAnswers: step.default_answers?.map(answerOf),
          ttlMs: step.ttl_ms,
          quorum: step.quorum,
        })
        .then(
          (value) => ({ value }),
          (error) => ({ error }),
        );
      this.asks.set(step.name, ask);
    } else if (step.do === "pending") {
      const ask = this.asks.get(step.ask);
      const client = this.client({ key: ask.key });
      const known = this.bound();
      const pending = await eventually(`${step.ask} to be pending`, async () =>
        (await client.listPending(ask.session)).find((p) => !known.has(p.rpcId)),
      );
      ask.rpcId = pending.rpcId;
    } else if (step.do === "answer") {
      const ask = this.asks.get(step.ask);
      await expectOutcome(step, `answer ${step.ask}`, () =>
        this.client(step).answer(ask.session, ask.rpcId, step.answers.map(answerOf)),
      );
    } else if (step.do === "cancel") {
      const ask = this.asks.get(step.ask);
      await expectOutcome(step, `cancel ${step.ask}`, () =>
        this.client(step).cancel(ask.session, ask.rpcId, step.reason ?? ""),
      );
    } else if (step.do === "abort") {
      const ask = this.asks.get(step.ask);
      await expectOutcome(step, `abort ${step.ask}`, () => this.client(step).abort(ask.session, ask.requestId));
    } else if (step.do === "outcome") {
      const ask = this.asks.get(step.ask);
      const { value, error } = await within(`the outcome of ${step.ask}`, ask.result);
      if (step.error) {
        expectError(error, step.error, `ask ${step.ask}`);
      } else {
        assert.ok(value, `ask ${step.ask} failed: ${error}`);
        expectAnswers(value.answers, step.answers);
        assert.equal(value.resolvedBy, step.resolved_by);
        assert.equal(value.resolution, step.resolution ?? "ANSWERED");
        if (step.approvers) {
          assert.deepEqual(value.approvers, step.approvers);
        }
        if (ask.rpcId) {
          assert.equal(value.rpcId, ask.rpcId, "the answer of the same ask");
        }
      }
    } else if (step.do === "follow") {
      const events = this.client(step).follow({
        sessionId: step.session,
        after: step.after,
        exclusive: step.exclusive ?? false,
        signal: this.stop.signal,
      });
      this.follows.set(step.name, events);
    } else if (step.do === "event") {
      const events = this.follows.get(step.follow);
      let next;
      try {
        next = await within(`an event of ${step.follow}`, events.next());
      } catch (e) {
        if (step.error) {
          expectError(e, step.error, `follow ${step.follow}`);
          return;
        }
        throw e;
      }
      assert.ok(!step.error, `follow ${step.follow}: expected ${step.error?.reason}, got ${JSON.stringify(next.value?.kind)}`);
      const event = next.value;
      assert.equal(event?.kind, step.kind, `follow ${step.follow}`);
      if (step.kind === "synced") {
        assert.equal(event.resumed, step.resumed, "synced.resumed");
      } else if (["requested", "resolved", "reminder", "escalated", "approval"].includes(step.kind)) {
        const ask = this.asks.get(step.ask);
        const rpcId = event[event.kind].rpcId;
        ask.rpcId ??= rpcId;
        assert.equal(rpcId, ask.rpcId, `the ${step.kind} event of ${step.ask}`);
        if (step.resolution) {
          assert.equal(Resolution[event.resolved.reason], step.resolution);
        }
        if (step.kind === "approval") {
          const { subject, count, needed } = event.approval;
          assert.deepEqual({ subject, count, needed }, { subject: step.subject, count: step.count, needed: step.needed });
        }
      }
    } else if (step.do === "cut") {
      this.proxy.cut();
    } else if (step.do === "restore") {
      this.proxy.restore();
    } else if (step.do === "attach") {
      const parent = step.parent ? this.leases.get(step.parent).agentId : "";
      await expectOutcome(step, `attach ${step.name}`, async () => {
        const lease = await this.client(step).attach(step.agent_id, parent);
        this.leases.set(step.name, { agentId: step.agent_id, lease });
      });
    } else if (step.do === "detach") {
      await within(`detach ${step.lease}`, this.leases.get(step.lease).lease.close());
    } else {
      assert.fail(`a step this runner does not know: ${JSON.stringify(step)}`);
    }
  }

  async close() {
    this.stop.abort();
    for (const client of this.clients.values()) {
      client.close();
    }
    await Promise.allSettled([...this.asks.values()].map((a) => a.result));
  }
}

async function keysFile(dir, keys) {
  const file = join(dir, "keys.json");
  const tokens = {};
  for (const [name, key] of Object.entries(keys)) {
    const args = ["keys", "add", "--file", file, "--tenant", key.tenant, "--sub", key.sub, "--roles", key.roles.join(",")];
    if (key.sessions) {
      args.push("--sessions", key.sessions.join(","));
    }
    tokens[name] = (await askgateOutput(args)).trim();
  }
  return { file, tokens };
}

for (const scenario of SCENARIOS.scenarios) {
  test(`${scenario.name}: ${scenario.about}`, async (t) => {
    const dir = tempDir();
    t.after(dir.remove);
    const args = [...(scenario.server?.args ?? [])];
    let tokens = {};
    if (scenario.server?.keys) {
      const keys = await keysFile(dir.path, scenario.server.keys);
      args.push("--auth", "keys", "--keys-file", keys.file);
      tokens = keys.tokens;
    }
    const server = await Server.start(args);
    t.after(() => server.stop());
    const proxy = await Proxy.start(server.addr);
    t.after(() => proxy.close());
    const run = new Run(server, proxy, tokens);
    t.after(() => run.close());
    for (const [i, step] of scenario.steps.entries()) {
      await t.test(`step ${i + 1}: ${step.do}`, () => run.step(step));
    }
  });
}

test("the scenario file names every reason the proto has", async () => {
  const { REASONS } = await import("@askgate/client");
  const covered = new Set(Object.keys(SCENARIOS.not_in_scenarios));
  const collect = (value) => {
    if (value && typeof value === "object") {
      if (typeof value.reason === "string" && typeof value.code === "string") {
        covered.add(value.reason);
      }
      Object.values(value).forEach(collect);
    }
  };
  collect(SCENARIOS.scenarios);
  assert.deepEqual(
    REASONS.filter((r) => r !== "ERROR_REASON_UNSPECIFIED" && !covered.has(r)),
    [],
    "reasons no scenario meets",
  );
});


// The one retry rule every SDK applies (scenarios.json's `retries`).
test("the client retries exactly the shared list", () => {
  assert.ok(SCENARIOS.retries.cases.length > 0);
  for (const c of SCENARIOS.retries.cases) {
    const error = new AskgateError(c.reason, SCENARIOS.codes[c.code], "a failure");
    assert.equal(error.retryable, c.retryable, JSON.stringify(c));
  }
});
