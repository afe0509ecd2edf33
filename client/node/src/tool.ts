// The model-facing `ask_user_question` tool: its definition (the same name,
// description and JSON Schema as every askgate SDK and `askgate mcp`), an executor
// that asks through askgate and returns the tool result text, and the definition in
// OpenAI's and Anthropic's tool shapes.
//
//   const executor = new AskUserQuestion(client, "session-1");
//   const output = await executor.run(toolCall.arguments, { signal });
//   modelReads(output.text);        // answers as compact JSON, or "Error: ..."
//   if (output.error) route(output.error.reason);

import { readFileSync } from "node:fs";

import { Code } from "@connectrpc/connect";

import type { Client } from "./client.js";
import { AskgateError, type Reason } from "./errors.js";
import type { Question } from "./gen/askgate/v1/askgate_pb.js";
import {
  type Action,
  type Answer,
  type Ask,
  action,
  answersJson,
  freshRequestId,
  option,
  question,
} from "./model.js";

/** A JSON Schema object. */
export type JsonSchema = { [key: string]: unknown };

interface Definition {
  name: string;
  description: string;
  input_schema: JsonSchema;
}

const DEFINITION: Definition = JSON.parse(
  readFileSync(new URL("../ask_user_question.json", import.meta.url), "utf8"),
);

/** The tool's name, as the model sees it. */
export const NAME: string = DEFINITION.name;
/** What the model reads about the tool. */
export const DESCRIPTION: string = DEFINITION.description;

/** The fixed texts of these failures (docs/protocol.md "Errors"). */
export const EMPTY_QUESTIONS_TEXT = "ask_user_question requires at least one question";
export const ASK_ABORTED_TEXT = "ask_user_question was aborted before the user answered";

/** The JSON Schema of the tool's arguments (a fresh copy); unknown fields are refused. */
export function inputSchema(): JsonSchema {
  return structuredClone(DEFINITION.input_schema);
}

/** `{name, description, input_schema}`: Anthropic's `Tool` (Messages API `tools`). */
export function anthropicTool(): { name: string; description: string; input_schema: JsonSchema & { type: "object" } } {
  return { name: NAME, description: DESCRIPTION, input_schema: { ...inputSchema(), type: "object" } };
}

/** OpenAI Chat Completions' `ChatCompletionTool`. */
export function openaiTool(): {
  type: "function";
  function: { name: string; description: string; parameters: JsonSchema };
} {
  return { type: "function", function: { name: NAME, description: DESCRIPTION, parameters: inputSchema() } };
}

/** OpenAI Responses API's `FunctionTool` (strict off: `header`, `options` are optional). */
export function openaiResponsesTool(): {
  type: "function";
  name: string;
  description: string;
  parameters: JsonSchema;
  strict: false;
} {
  return { type: "function", name: NAME, description: DESCRIPTION, parameters: inputSchema(), strict: false };
}

/** A failed call: askgate's reason and the gRPC code. */
export interface ToolError {
  reason: Reason;
  code: Code;
}

/** The text the model reads and, for a failure, the failure as data. */
export interface ToolOutput {
  text: string;
  error?: ToolError;
}

/**
 * The answers as the compact JSON the model receives:
 * `{"answers":[{"id":"db","selected":["Postgres"]}]}` (`custom` only when given).
 */
export function answersText(answers: readonly Answer[]): string {
  return JSON.stringify({ answers: answersJson(answers) });
}

function failed(reason: Reason, code: Code, message: string): ToolOutput {
  return { text: `Error: ${message}`, error: { reason, code } };
}

/** A refusal of the model's arguments, before anything is asked. */
export class ArgumentsError extends Error {
  override readonly name = "ArgumentsError";

  constructor(
    readonly reason: Extract<Reason, "BAD_REQUEST" | "EMPTY_QUESTIONS">,
    message: string,
  ) {
    super(message);
  }
}

function invalid(why: string): ArgumentsError {
  return new ArgumentsError("BAD_REQUEST", `invalid arguments: ${why}`);
}

const QUESTION_FIELDS = new Set(["id", "question", "header", "options", "multi_select"]);
const OPTION_FIELDS = new Set(["label", "description"]);

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Refuses a field the schema does not define, named by its path (`at`: "questions[0].", …). */
function refuseUnknown(data: Record<string, unknown>, known: Set<string>, at: string): void {
  const unknown = Object.keys(data)
    .filter((key) => !known.has(key))
    .sort();
  if (unknown.length > 0) {
    throw invalid(`${at}${unknown[0]}: unknown field \`${unknown[0]}\``);
  }
}

function parseQuestion(data: unknown, i: number): Question {
  if (!isObject(data)) {
    throw invalid(`questions[${i}] must be an object`);
  }
  refuseUnknown(data, QUESTION_FIELDS, `questions[${i}].`);
  for (const required of ["id", "question"]) {
    if (typeof data[required] !== "string") {
      throw invalid(`questions[${i}].${required} must be a string`);
    }
  }
  const options = data.options ?? [];
  if (!Array.isArray(options)) {
    throw invalid(`questions[${i}].options must be an array`);
  }
  const built = options.map((opt: unknown, j) => {
    if (!isObject(opt) || typeof opt.label !== "string") {
      throw invalid(`questions[${i}].options[${j}] needs a string label`);
    }
    refuseUnknown(opt, OPTION_FIELDS, `questions[${i}].options[${j}].`);
    if (opt.description !== undefined && opt.description !== null && typeof opt.description !== "string") {
      throw invalid(`questions[${i}].options[${j}].description must be a string`);
    }
    return option(opt.label, opt.description ?? undefined);
  });
  const header = data.header ?? undefined;
  if (header !== undefined && typeof header !== "string") {
    throw invalid(`questions[${i}].header must be a string`);
  }
  const multiSelect = data.multi_select ?? false;
  if (typeof multiSelect !== "boolean") {
    throw invalid(`questions[${i}].multi_select must be a boolean`);
  }
  return question(data.id as string, data.question as string, { header, options: built, multiSelect });
}

/**
 * The model's arguments as an ask: its questions, and the action they approve (when
 * they ask permission for one), which a receipt binds and the tenant's policy may
 * decide.
 */
export interface ToolAsk {
  questions: Question[];
  action?: Action;
}

/**
 * The questions of the model's arguments, as {@link parseAsk} reads them (without the
 * action: use `parseAsk` to ask with it).
 */
export function parseArguments(args: string | unknown): Question[] {
  return parseAsk(args).questions;
}

function parseAction(data: unknown): Action {
  if (!isObject(data)) {
    throw invalid("action must be an object");
  }
  refuseUnknown(data, new Set(["name", "arguments"]), "action.");
  if (typeof data.name !== "string") {
    throw invalid("action.name must be a string");
  }
  const args = data.arguments ?? {};
  if (!isObject(args)) {
    throw invalid("action.arguments must be an object");
  }
  return action(data.name, args);
}

/**
 * The ask of the model's arguments (JSON text or a parsed object). Throws an
 * {@link ArgumentsError}: `BAD_REQUEST` (not the schema's shape, unknown fields
 * included) or `EMPTY_QUESTIONS`.
 */
export function parseAsk(args: string | unknown): ToolAsk {
  let data: unknown = args;
  if (typeof args === "string") {
    try {
      data = JSON.parse(args);
    } catch (e) {
      throw invalid(`not JSON: ${(e as Error).message}`);
    }
  }
  if (!isObject(data)) {
    throw invalid("expected an object");
  }
  refuseUnknown(data, new Set(["questions", "action"]), "");
  const questions = data.questions ?? [];
  if (!Array.isArray(questions)) {
    throw invalid("`questions` must be an array");
  }
  if (questions.length === 0) {
    throw new ArgumentsError("EMPTY_QUESTIONS", EMPTY_QUESTIONS_TEXT);
  }
  const parsed = questions.map(parseQuestion);
  return data.action === undefined
    ? { questions: parsed }
    : { questions: parsed, action: parseAction(data.action) };
}

/** Executes `ask_user_question` calls for one session. */
export class AskUserQuestion {
  constructor(
    readonly client: Client,
    readonly sessionId: string,
    readonly options: { timeoutMs?: number } = {},
  ) {}

  /**
   * Asks and waits; never throws. Aborting `signal` (the agent's turn was
   * interrupted) resolves the ask ABORTED at once and gives the fixed aborted text.
   */
  async run(args: string | unknown, { signal }: { signal?: AbortSignal } = {}): Promise<ToolOutput> {
    let asked: ToolAsk;
    try {
      asked = parseAsk(args);
    } catch (e) {
      if (e instanceof ArgumentsError) {
        return failed(e.reason, Code.InvalidArgument, e.message);
      }
      throw e;
    }
    if (signal?.aborted) {
      return failed("ASK_ABORTED", Code.Canceled, ASK_ABORTED_TEXT);
    }
    const requestId = freshRequestId();
    const dropped = new AbortController();
    const ask: Ask = {
      sessionId: this.sessionId,
      questions: asked.questions,
      action: asked.action,
      requestId,
      timeoutMs: this.options.timeoutMs,
      signal: dropped.signal,
    };
    const onAbort = () => dropped.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const result = await this.client.ask(ask);
      return { text: answersText(result.answers) };
    } catch (thrown) {
      if (dropped.signal.aborted) {
        await this.client.abort(this.sessionId, requestId).catch(() => undefined);
        return failed("ASK_ABORTED", Code.Canceled, ASK_ABORTED_TEXT);
      }
      const error = AskgateError.from(thrown);
      return failed(error.reason, error.code, error.rawMessage);
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }
}
