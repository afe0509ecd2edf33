/**
 * The W3C trace context an ask carries to the server, whose span of the human's wait
 * then joins the caller's trace.
 */

import type { Ask } from "./model.js";

/** The headers of a trace context (never its baggage). */
const TRACE_HEADERS = ["traceparent", "tracestate"] as const;

type OpenTelemetryApi = typeof import("@opentelemetry/api");

/** `@opentelemetry/api`, when the application has it (an optional peer dependency). */
let api: Promise<OpenTelemetryApi | undefined> | undefined;

function openTelemetry(): Promise<OpenTelemetryApi | undefined> {
  api ??= import("@opentelemetry/api").catch(() => undefined);
  return api;
}

/**
 * The ask's trace context headers: the ones it gives, else the active OpenTelemetry
 * context's, as the global propagator writes them.
 */
export async function traceHeaders(ask: Ask): Promise<Record<string, string>> {
  if (ask.traceparent) {
    return ask.tracestate
      ? { traceparent: ask.traceparent, tracestate: ask.tracestate }
      : { traceparent: ask.traceparent };
  }
  const otel = await openTelemetry();
  if (otel === undefined) {
    return {};
  }
  const carrier: Record<string, string> = {};
  otel.propagation.inject(otel.context.active(), carrier);
  const headers: Record<string, string> = {};
  for (const name of TRACE_HEADERS) {
    if (carrier[name]) {
      headers[name] = carrier[name];
    }
  }
  return headers;
}
