// askgate for Node: AI agents ask humans structured questions and wait for the answer.
//
//   import { Client, question } from "@askgate/client";
//
//   const client = new Client();                    // ASKGATE_ADDR, ASKGATE_TOKEN
//   const result = await client.ask({
//     sessionId: "demo",
//     questions: [question("db", "Which database?", { options: ["Postgres (Recommended)", "SQLite"] })],
//     timeoutMs: 300_000,
//   });
//
// Failures throw `AskgateError`, whose `reason` is a `Reason`. `@askgate/client/tool` is
// the model-facing `ask_user_question` tool; `@askgate/client/ai` its Vercel AI SDK tool;
// `@askgate/client/receipts` checks a receipt before an approved action runs.

export { AgentLease, Client, type ClientOptions, DEFAULT_ADDR, type FollowOptions } from "./client.js";
export { Client as TransportClient } from "./core.js";
export { AskgateError, REASONS, type Reason, type Violation } from "./errors.js";
export type {
  Approval,
  Delivery,
  Endpoint,
  Escalated,
  Identity,
  LinkCode,
  Person,
  QuestionAnswer,
  Question,
  QuestionOption,
  Reminder,
  Requested,
  Resolved,
  SlackApp,
  WhoAmIResponse,
} from "./gen/askgate/v1/askgate_pb.js";
export { DeliveryStatus, Resolution } from "./gen/askgate/v1/askgate_pb.js";
export {
  type Action,
  type Answer,
  type Approvers,
  type Ask,
  type EscalationStep,
  type AskResult,
  DEFAULT_REATTACH_GRACE_MS,
  DEFAULT_RETRY_BUDGET_MS,
  TTL_SLACK_MS,
  action,
  type Event,
  type QuestionOptions,
  custom,
  option,
  question,
  select,
  skip,
} from "./model.js";
export { Code } from "@connectrpc/connect";
