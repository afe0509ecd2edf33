// What a Telegram chat sees, drawn from the messages askgate sent (the docs' Telegram
// screenshots): a real askgate sends to a fake Bot API, its HTML and inline keyboard
// are laid out the way Telegram lays them out, a click is POSTed as Telegram sends it,
// and the edited message is drawn again. Not a Telegram client: just enough of the
// look to show what a chat sees. The Bot API's rules are checked by the Rust tests
// (tests/integration/telegram.rs).

import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";
import { Harness, question, screenshot, tempFile, within } from "./harness.mjs";

const TOKEN = "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11";

/** A fake Bot API that records every call and answers as Telegram does. */
async function fakeTelegram(t) {
  const calls = [];
  const waiters = [];
  let next = 100;
  const server = http.createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      const method = request.url.split("/").pop();
      const json = JSON.parse(body || "{}");
      let result = true;
      if (method === "getMe") result = { id: 777, is_bot: true, first_name: "askgate", username: "askgate_ops_bot" };
      if (method === "sendMessage") result = { message_id: ++next, chat: { id: json.chat_id }, date: 1 };
      calls.push({ method, body: json, result });
      response.setHeader("content-type", "application/json");
      response.end(JSON.stringify({ ok: true, result }));
      for (const wake of waiters.splice(0)) wake();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => server.close());
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    async next(method, matching = () => true) {
      for (;;) {
        const found = calls.find((c) => c.method === method && matching(c));
        if (found) return found;
        await within(`Telegram ${method}`, new Promise((resolve) => waiters.push(resolve)));
      }
    },
  };
}

/** A message as a Telegram chat shows it: its HTML (Telegram's tags) and keyboard. */
function preview(message) {
  const rows = (message.reply_markup?.inline_keyboard ?? [])
    .map((row) => `<div class="row">${row.map((b) => `<div class="button">${escape(b.text)}</div>`).join("")}</div>`)
    .join("");
  const text = message.text.replace(/\n/g, "<br>").replace(/<pre><br>/g, "<pre>");
  return `<!doctype html><html><head><meta charset="utf-8"><style>
    body { background: #8fb087; font: 15px -apple-system, system-ui, sans-serif; margin: 0; padding: 24px; }
    .bubble { background: #fff; border-radius: 12px; padding: 8px 12px; max-width: 520px; box-shadow: 0 1px 1px #0002; }
    .from { color: #3a8fd3; font-weight: 600; margin-bottom: 4px; }
    pre { background: #f2f4f6; border-radius: 6px; padding: 6px; white-space: pre-wrap; font-size: 13px; margin: 4px 0; }
    a { color: #3a8fd3; text-decoration: none; }
    .keyboard { max-width: 544px; margin-top: 4px; }
    .row { display: flex; gap: 4px; margin-top: 4px; }
    .button { flex: 1; background: #0000002e; color: #fff; border-radius: 8px; padding: 8px; text-align: center; font-weight: 500; }
  </style></head><body><div class="bubble"><div class="from">askgate_ops_bot</div>${text}</div>
  <div class="keyboard">${rows}</div></body></html>`;
}

function escape(text) {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

test("a plan review as a Telegram chat sees it, before and after a click on Approve", async (t) => {
  const h = new Harness();
  t.after(() => h.close());
  const fake = await fakeTelegram(t);
  const key = tempFile("secret.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
  const token = tempFile("bot-token", TOKEN);
  const url = await h.serve([
    "--public-url", "https://askgate.example.com", "--secret-key-file", key, "--telegram-api-url", fake.url,
  ]);
  const bot = JSON.parse(await h.run(["telegram", "connect", "--addr", url, "--bot-token-file", token, "--chat-id", "-1001234567890"]));
  const hook = await fake.next("setWebhook");

  const plan = "1. Drain the blue pool\n2. Deploy v2.4.1 to blue\n3. Shift traffic 10% → 100%\n4. Keep green for an hour";
  const agent = h.ask(url, {
    sessionId: "deploy/prod",
    questions: [
      question("plan", "Ship release 2.4.1 to production?", [
        { label: "Approve", description: "run the plan as written" },
        { label: "Reject", description: "stop; nothing changes" },
      ], { header: "Release 2.4.1", detail: plan, intent: { planReview: { approve: "Approve" } } }),
    ],
  });
  const sent = await fake.next("sendMessage");
  const page = await h.page({ width: 620, height: 520 });
  await page.setContent(preview(sent.body));
  await screenshot(page, "telegram-question");

  // Ana presses Approve: Telegram POSTs the callback to the bot's webhook.
  const approve = sent.body.reply_markup.inline_keyboard.flat().find((b) => b.text.includes("Approve"));
  const update = {
    update_id: 1,
    callback_query: {
      id: "cq1",
      from: { id: 42, is_bot: false, first_name: "Ana" },
      message: { message_id: sent.result.message_id, chat: { id: -1001234567890, type: "supergroup" }, reply_markup: sent.body.reply_markup },
      chat_instance: "1",
      data: approve.callback_data,
    },
  };
  const response = await fetch(`${url}/telegram/webhook/${bot.id}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": hook.body.secret_token },
    body: JSON.stringify(update),
  });
  assert.equal(response.status, 200);
  const { code, json } = await agent.result();
  assert.equal(code, 0);
  assert.equal(json.resolved_by, "telegram:42");
  const edited = await fake.next("editMessageText");
  await page.setContent(preview(edited.body));
  await screenshot(page, "telegram-answered");
});
