// The Vercel AI SDK adapter through the AI SDK's own tool loop: `generateText` with a
// scripted model (the SDK's MockLanguageModelV3; no model is called) that calls
// ask_user_question, against a real askgate with `askgate bot` answering.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client } from "@askgate/client";
import { askUserQuestionTool } from "@askgate/client/ai";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { Server, startBot, within } from "./support.mjs";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

const ARGUMENTS = {
  questions: [
    { id: "db", question: "Which database?", options: [{ label: "Postgres (Recommended)" }, { label: "SQLite" }] },
  ],
};

/** A model that calls the tool once, then answers with text. */
function scriptedModel() {
  return new MockLanguageModelV3({
    doGenerate: [
      {
        content: [{ type: "tool-call", toolCallId: "call-1", toolName: "ask_user_question", input: JSON.stringify(ARGUMENTS) }],
        finishReason: { unified: "tool-calls", raw: "tool_use" },
        usage,
        warnings: [],
      },
      {
        content: [{ type: "text", text: "Postgres it is." }],
        finishReason: { unified: "stop", raw: "end_turn" },
        usage,
        warnings: [],
      },
    ],
  });
}

test("generateText runs ask_user_question through askgate and hands the answers to the model", async (t) => {
  const server = await Server.start();
  t.after(() => server.stop());
  const bot = await startBot(server, "s");
  t.after(() => bot.stop());
  const client = new Client({ addr: server.addr });
  t.after(() => client.close());

  const model = scriptedModel();
  const result = await within(
    "generateText",
    generateText({
      model,
      prompt: "Set up the service.",
      tools: { ask_user_question: askUserQuestionTool(client, "s", { timeoutMs: 20_000 }) },
      stopWhen: stepCountIs(3),
    }),
  );
  const expected = '{"answers":[{"id":"db","selected":["Postgres (Recommended)"]}]}';
  assert.equal(result.steps[0].toolResults[0].output, expected);
  assert.equal(result.text, "Postgres it is.");
  // What the model received on its second turn: the tool result, as the tool message.
  const toolMessage = model.doGenerateCalls[1].prompt.find((m) => m.role === "tool");
  assert.deepEqual(toolMessage.content[0].output, { type: "text", value: expected });
  // The model's tool definition is askgate's schema.
  const offered = model.doGenerateCalls[0].tools[0];
  assert.equal(offered.name, "ask_user_question");
  assert.equal(offered.inputSchema.additionalProperties, false);
});
