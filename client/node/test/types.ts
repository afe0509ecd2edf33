// Compiled, not run (`npm run check`): the tool definitions are what the official
// OpenAI and Anthropic SDKs accept, and the SDK's public API types as documented.

import type Anthropic from "@anthropic-ai/sdk";
import type { ChatCompletionTool } from "openai/resources/chat/completions";
import type { FunctionTool } from "openai/resources/responses/responses";

import { type AskResult, AskgateError, Client, type Event, type Reason, question } from "@askgate/client";
import { askUserQuestionTool } from "@askgate/client/ai";
import { AskUserQuestion, type ToolOutput, anthropicTool, openaiResponsesTool, openaiTool } from "@askgate/client/tool";

export const anthropic: Anthropic.Messages.Tool = anthropicTool();
export const chat: ChatCompletionTool = openaiTool();
export const responses: FunctionTool = openaiResponsesTool();

export async function usage(client: Client): Promise<void> {
  const result: AskResult = await client.ask({
    sessionId: "demo",
    questions: [question("db", "Which database?", { options: ["Postgres (Recommended)", "SQLite"] })],
    timeoutMs: 300_000,
  });
  const selected: string[] = result.answers[0].selected;
  void selected;
  try {
    await client.cancel("demo", "rpc", "no");
  } catch (error) {
    if (error instanceof AskgateError) {
      const reason: Reason = error.reason;
      // A typo in a reason name does not compile.
      // @ts-expect-error
      const typo: Reason = "NOT_PENDNG";
      void [reason, typo];
    }
  }
  for await (const event of client.follow({ sessionId: "demo" })) {
    const narrowed: Event = event;
    if (narrowed.kind === "requested") {
      void narrowed.requested.rpcId;
    }
  }
  const output: ToolOutput = await new AskUserQuestion(client, "demo").run("{}");
  void output.error?.reason;
  void askUserQuestionTool(client, "demo");
}
