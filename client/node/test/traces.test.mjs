// The SDK carries the caller's trace context (docs/operations.md, "Traces"): the
// active OpenTelemetry context, or the one an ask gives. A real `askgate serve` that
// exports traces makes the ask's span the caller's child; the `requested` event's
// `traceparent` (the ask's span) shows which trace it joined.

import assert from "node:assert/strict";
import { createServer } from "node:net";
import { after, before, test } from "node:test";

import { trace } from "@opentelemetry/api";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { Client, question, select } from "@askgate/client";

import { Server, eventually, within } from "./support.mjs";

let server;
let provider;

/** A port nothing listens on: the spans' export fails, which the asks never notice. */
async function closedPort() {
  const listener = createServer();
  await new Promise((resolve) => listener.listen(0, "127.0.0.1", resolve));
  const { port } = listener.address();
  await new Promise((resolve) => listener.close(resolve));
  return port;
}

before(async () => {
  server = await Server.start(["--otlp-endpoint", `http://127.0.0.1:${await closedPort()}`]);
  // The application's tracing: the global context manager and W3C propagator.
  provider = new NodeTracerProvider();
  provider.register();
});

after(async () => {
  await provider.shutdown();
  await server.stop();
});

/** Asks `ask`; the pending ask's `traceparent` once it is pending; then answers it. */
async function askedTraceparent(ask) {
  const agent = new Client({ addr: server.addr });
  const ui = new Client({ addr: server.addr });
  try {
    const call = agent.ask(ask);
    const [pending] = await eventually("the ask", async () => {
      const listed = await ui.listPending(ask.sessionId);
      return listed.length > 0 ? listed : undefined;
    });
    await ui.answer(ask.sessionId, pending.rpcId, [select("go", "Ship it")]);
    await within("the ask", call);
    return pending.traceparent;
  } finally {
    agent.close();
    ui.close();
  }
}

function deploy(sessionId, extra = {}) {
  return {
    sessionId,
    questions: [question("go", "Deploy?", { options: ["Ship it", "Hold"] })],
    hold: true,
    ...extra,
  };
}

test("an ask carries the active OpenTelemetry context", async () => {
  const tracer = trace.getTracer("planner");
  await tracer.startActiveSpan("execute_tool ask_user_question", async (span) => {
    const { traceId, spanId } = span.spanContext();
    const traceparent = await askedTraceparent(deploy("active"));
    span.end();
    const [, joined, askSpan, flags] = traceparent.split("-");
    assert.equal(joined, traceId, "the ask joined the caller's trace");
    assert.notEqual(askSpan, spanId, "with a span of its own");
    assert.equal(flags, "01");
  });
});

test("a given traceparent wins over the active context", async () => {
  const given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const traceparent = await askedTraceparent(deploy("given", { traceparent: given, tracestate: "v=1" }));
  assert.equal(traceparent.split("-")[1], "0af7651916cd43dd8448eb211c80319c");
});

test("an ask with no context starts a trace of its own", async () => {
  const traceparent = await askedTraceparent(deploy("none"));
  assert.match(traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
});
