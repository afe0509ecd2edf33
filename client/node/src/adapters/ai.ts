// The Vercel AI SDK's tool: `ask_user_question` as an AI SDK `tool()`, executed
// through askgate. Needs the `ai` package (5 or newer).
//
//   import { askUserQuestionTool } from "@askgate/client/ai";
//   await generateText({ model, tools: { ask_user_question: askUserQuestionTool(client, "s-1") }, ... });

import { jsonSchema, tool } from "ai";

import type { Client } from "../client.js";
import { AskUserQuestion, DESCRIPTION, inputSchema } from "../tool.js";

/** The arguments the model sends (the tool's JSON Schema). */
export interface AskUserQuestionInput {
  questions: {
    id: string;
    question: string;
    header?: string;
    options?: { label: string; description?: string }[];
    multi_select?: boolean;
  }[];
}

/**
 * `ask_user_question` for `generateText` / `streamText` / agents: the result the model
 * reads is the answers' compact JSON or the "Error: ..." text; the AI SDK's
 * `abortSignal` (a stopped generation) resolves the ask ABORTED at once.
 */
export function askUserQuestionTool(client: Client, sessionId: string, options: { timeoutMs?: number } = {}) {
  const executor = new AskUserQuestion(client, sessionId, options);
  return tool({
    description: DESCRIPTION,
    inputSchema: jsonSchema<AskUserQuestionInput>(inputSchema()),
    execute: async (input: AskUserQuestionInput, { abortSignal }) =>
      (await executor.run(input, { signal: abortSignal })).text,
  });
}
