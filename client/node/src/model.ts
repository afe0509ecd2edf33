// Building a batch of questions and reading what comes back.

import { create } from "@bufbuild/protobuf";

import {
  type Approval,
  type AskRequest,
  AskRequestSchema,
  type Escalated,
  type Question,
  type QuestionAnswer,
  QuestionAnswerSchema,
  type QuestionOption,
  QuestionOptionSchema,
  QuestionSchema,
  type Reminder,
  type Requested,
  type Resolved,
  type SubscribeResponse,
  Unattended,
} from "./gen/askgate/v1/askgate_pb.js";

/**
 * How long a question stays answerable after the asking call went away (a broken
 * connection, a restarted worker), so that a retry with the same requestId picks the
 * answer up. The Rust and Python clients' default too.
 */
export const DEFAULT_REATTACH_GRACE_MS = 10_000;

/**
 * How long `ask` keeps retrying while every attempt fails (the node drains, the
 * server is unreachable); the ask's timeout bounds it too.
 */
export const DEFAULT_RETRY_BUDGET_MS = 60_000;

/** An option; end the label with " (Recommended)" to mark the one you recommend. */
export function option(label: string, description?: string): QuestionOption {
  return create(QuestionOptionSchema, { label, description });
}

/** How a question is shown besides its text. */
export interface QuestionOptions {
  /** A short tag (a chip in the console). */
  header?: string;
  /** Longer context (markdown); the plan of a plan review. */
  detail?: string;
  /** Labels or `option(...)`; none makes a free-text question. */
  options?: readonly (QuestionOption | string)[];
  multiSelect?: boolean;
  /** The label of the option that approves the plan in `detail`. */
  planReview?: string;
  /** The answer reaches this ask's caller only (docs/approvals.md). */
  secret?: boolean;
}

/** A question; its id is unique within the ask. */
export function question(id: string, text: string, shown: QuestionOptions = {}): Question {
  const { header, detail, options = [], multiSelect = false, planReview, secret = false } = shown;
  return create(QuestionSchema, {
    id,
    question: text,
    header,
    detail,
    options: options.map((o) => (typeof o === "string" ? option(o) : o)),
    multiSelect,
    secret,
    intent:
      planReview === undefined
        ? undefined
        : { kind: { case: "planReview", value: { approve: planReview } } },
  });
}

/** An answer choosing these option labels. */
export function select(id: string, ...labels: string[]): QuestionAnswer {
  return create(QuestionAnswerSchema, { id, selected: labels });
}

/** An answer in the human's own words. */
export function custom(id: string, text: string): QuestionAnswer {
  return create(QuestionAnswerSchema, { id, custom: text });
}

/** An explicit skip of one question. */
export function skip(id: string): QuestionAnswer {
  return create(QuestionAnswerSchema, { id });
}

/**
 * One Ask: a batch of questions for a session, and how to wait for it.
 *
 * By default it carries a fresh `requestId` and a reattach grace, and the client
 * retries a call that failed because the node drained or the server was unreachable,
 * with the same requestId: the retry joins the same pending ask, or gets the human's
 * answer if it came meanwhile.
 */
export interface Ask {
  sessionId: string;
  questions: readonly Question[];
  /** How long to wait for the human (the gRPC deadline); none waits for as long as the server allows. */
  timeoutMs?: number;
  /** Stay pending in a session nobody follows yet (else NO_PROVIDER). */
  hold?: boolean;
  /** The attached agent asking, with the incarnation of its lease. */
  agent?: { agentId: string; incarnation: string };
  /** Default: a fresh UUID. */
  requestId?: string;
  /** Default: {@link DEFAULT_REATTACH_GRACE_MS}. */
  reattachGraceMs?: number;
  labels?: Readonly<Record<string, string>>;
  /** Retry UNAVAILABLE / SHUTTING_DOWN / BACKEND_UNAVAILABLE (default true). */
  retry?: boolean;
  /** Default: {@link DEFAULT_RETRY_BUDGET_MS}. */
  retryForMs?: number;
  /**
   * Reminders and escalation while pending, in milliseconds from the ask (0: none; each
   * non-zero interval at least 1000); unset: the server's default.
   */
  notify?: {
    remindAfterMs?: number;
    remindEveryMs?: number;
    maxReminders?: number;
    escalateAfterMs?: number;
  };
  /**
   * Aborting drops the call: the ask stays answerable for its reattach grace (use
   * `Client.abort` to resolve it at once, as the tool executor does).
   */
  signal?: AbortSignal;
  /** The action the answer approves, bound to the resolution by a signed receipt. */
  action?: Action;
  /** Resolve only when this many (2 to 10) distinct subjects gave the same answers. */
  quorum?: number;
  /** What the ask resolves with (as DEFAULTED) when its lifetime ends unanswered. */
  defaultAnswers?: readonly QuestionAnswer[];
  /** The only channels that may resolve it (e.g. "console", "tui"); none: any. */
  allowedChannels?: readonly string[];
  /**
   * The W3C trace context of the caller's span (`traceparent`, and `tracestate`): the
   * ask's span on the server (the human's wait) becomes its child. Unset: the active
   * OpenTelemetry context, when `@opentelemetry/api` is installed.
   */
  traceparent?: string;
  tracestate?: string;
  /** The ask's own lifetime from registration; the call waits {@link TTL_SLACK_MS} beyond it. */
  ttlMs?: number;
  /** Only these people may answer it; anyone else gets NOT_AN_APPROVER. */
  approvers?: Approvers;
  /** What happens while it stays unanswered, step by step (in time order). */
  escalation?: readonly EscalationStep[];
}

/**
 * One escalation step: `afterMs` from the ask, with it still pending, its `approvers`
 * join the ask's (or replace them, with `replace`) and the channel connections
 * `notifyChannels` (ids such as `sl_…`) are sent the ask.
 */
export interface EscalationStep {
  afterMs: number;
  approvers?: Approvers;
  replace?: boolean;
  notifyChannels?: readonly string[];
}

function approversOf(approvers: Approvers | undefined) {
  return approvers === undefined
    ? undefined
    : {
        subjects: [...(approvers.subjects ?? [])],
        groups: [...(approvers.groups ?? [])],
        cancelToo: approvers.cancelToo ?? false,
      };
}

/**
 * Who alone may answer an ask: `subjects` (credential subjects or channel identities:
 * `ana`, `slack:T1/U2`, `telegram:42`, `email:ana@example.org`) and `groups` (a
 * credential's groups). With `cancelToo`, only they may cancel it too.
 */
export interface Approvers {
  subjects?: readonly string[];
  groups?: readonly string[];
  cancelToo?: boolean;
}

/** What an approval is for: a tool or operation and its exact arguments (a JSON text). */
/**
 * What an approval is for: a tool or operation and its exact arguments (a JSON text),
 * and the answers that approve it (`approvingAnswers`; by default the first option of
 * the first question). Numbers in the arguments must be exact in a double (I-JSON):
 * send larger integers and finer decimals as strings.
 */
export interface Action {
  name: string;
  argumentsJson: string;
  approvingAnswers?: QuestionAnswer[];
}

/** An action from its arguments as a JSON value. */
export function action(name: string, args: unknown, approvingAnswers?: QuestionAnswer[]): Action {
  return approvingAnswers === undefined
    ? { name, argumentsJson: JSON.stringify(args) }
    : { name, argumentsJson: JSON.stringify(args), approvingAnswers };
}

/** How much longer than an ask's own lifetime (`ttlMs`) its call waits. */
export const TTL_SLACK_MS = 5_000;

/** How long the call of `ask` waits: its timeout, stretched past the ask's lifetime. */
export function waitOf(ask: Ask): number | undefined {
  if (ask.ttlMs === undefined) {
    return ask.timeoutMs;
  }
  const lifetime = ask.ttlMs + TTL_SLACK_MS;
  return ask.timeoutMs === undefined ? lifetime : Math.max(ask.timeoutMs, lifetime);
}

/** The wire request of an ask, with its request id settled. */
export function askRequest(ask: Ask, requestId: string): AskRequest {
  return create(AskRequestSchema, {
    sessionId: ask.sessionId,
    questions: [...ask.questions],
    requestId,
    reattachGraceMs: Math.round(ask.reattachGraceMs ?? DEFAULT_REATTACH_GRACE_MS),
    labels: { ...ask.labels },
    ifUnattended: ask.hold ? Unattended.HOLD : Unattended.FAIL,
    agent: ask.agent,
    notify: ask.notify,
    action: ask.action,
    quorum: ask.quorum === undefined ? undefined : { count: ask.quorum },
    defaultAnswers: [...(ask.defaultAnswers ?? [])],
    allowedChannels: [...(ask.allowedChannels ?? [])],
    ttlMs: ask.ttlMs === undefined ? 0n : BigInt(Math.round(ask.ttlMs)),
    approvers: approversOf(ask.approvers),
    escalation: (ask.escalation ?? []).map((step) => ({
      afterMs: BigInt(Math.round(step.afterMs)),
      approvers: approversOf(step.approvers),
      replace: step.replace ?? false,
      notifyChannels: [...(step.notifyChannels ?? [])],
    })),
  });
}

export function freshRequestId(): string {
  return crypto.randomUUID();
}

/** One question's answer, normalised by the server. */
export interface Answer {
  id: string;
  selected: string[];
  /** The human's own words, when given. */
  custom?: string;
}

/** An answer as the answers JSON holds it: its own words, or that it is secret. */
export type AnswerEntry =
  | { id: string; selected: string[]; custom?: string }
  | { id: string; secret: true };

/**
 * The answers JSON every askgate surface writes (pinned across the SDKs by
 * tests/contract/vectors.json): `{id, selected, custom?}` per answer, `custom` only when
 * own words were given, or `{id, secret: true}` for a question `isSecret` names (a
 * receipt never carries a secret, nor a hash of one).
 */
export function answersJson(
  answers: readonly { readonly id: string; readonly selected: readonly string[]; readonly custom?: string }[],
  isSecret: (id: string) => boolean = () => false,
): AnswerEntry[] {
  return answers.map((a) =>
    isSecret(a.id)
      ? { id: a.id, secret: true }
      : a.custom === undefined
        ? { id: a.id, selected: [...a.selected] }
        : { id: a.id, selected: [...a.selected], custom: a.custom },
  );
}

export function answerOf(answer: QuestionAnswer): Answer {
  return answer.custom === undefined
    ? { id: answer.id, selected: [...answer.selected] }
    : { id: answer.id, selected: [...answer.selected], custom: answer.custom };
}

/**
 * A resolved ask: its rpcId, one answer per question in question order, who answered,
 * how (`"ANSWERED"`, or `"DEFAULTED"` when its lifetime ended and its default answers
 * apply: never reported as answered, or `"ALLOWED_BY_POLICY"` when the tenant's policy
 * allowed its action and nobody was asked), every approver, and for an ask with an action
 * the server's signed receipt (see `verifyReceipt`).
 */
export interface AskResult {
  rpcId: string;
  answers: Answer[];
  resolvedBy: string;
  resolution: "ANSWERED" | "DEFAULTED" | "ALLOWED_BY_POLICY";
  approvers: string[];
  receipt: string;
}

/**
 * One event of a subscription, with its cursor: a question `requested` or
 * `resolved`; a pending ask's `reminder` or `escalated`; `synced` (the replay is
 * over; `resumed` says whether it resumed from the cursor); `reset` (drop what you
 * hold: a fresh snapshot follows).
 */
export type Event =
  | { kind: "requested"; cursor: string; requested: Requested }
  | { kind: "resolved"; cursor: string; resolved: Resolved }
  | { kind: "reminder"; cursor: string; reminder: Reminder }
  | { kind: "escalated"; cursor: string; escalated: Escalated }
  | { kind: "approval"; cursor: string; approval: Approval }
  | { kind: "synced"; cursor: string; resumed: boolean }
  | { kind: "reset"; cursor: string };

/** The event of a message; undefined for a kind this client does not know yet. */
export function eventOf(message: SubscribeResponse): Event | undefined {
  const { cursor, event } = message;
  switch (event.case) {
    case "requested":
      return { kind: "requested", cursor, requested: event.value };
    case "resolved":
      return { kind: "resolved", cursor, resolved: event.value };
    case "synced":
      return { kind: "synced", cursor, resumed: event.value.resumed };
    case "reset":
      return { kind: "reset", cursor };
    case "reminder":
      return { kind: "reminder", cursor, reminder: event.value };
    case "escalated":
      return { kind: "escalated", cursor, escalated: event.value };
    case "approval":
      return { kind: "approval", cursor, approval: event.value };
    default:
      return undefined;
  }
}
