// A fake of the Slack Web API for the console's tests, and a preview of Block Kit
// messages drawn as HTML (what the docs' Slack screenshots show): the blocks askgate
// sends, laid out the way Slack lays them out. Not a Slack client: just enough of the
// look to show what a channel sees.

import { createHmac } from "node:crypto";
import http from "node:http";

/** A fake Slack Web API: checks the bot token, records calls, answers as Slack does. */
export class FakeSlack {
  static async start(token) {
    const fake = new FakeSlack(token);
    fake.server = http.createServer((request, response) => fake.serve(request, response));
    await new Promise((resolve) => fake.server.listen(0, "127.0.0.1", resolve));
    fake.url = `http://127.0.0.1:${fake.server.address().port}/api`;
    return fake;
  }

  constructor(token) {
    this.token = token;
    this.calls = [];
    this.waiters = [];
    this.ts = 0;
  }

  serve(request, response) {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      const method = request.url.replace(/^\/api\//, "");
      const json = JSON.parse(body || "null");
      const authorized = request.headers.authorization === `Bearer ${this.token}`;
      let reply;
      if (!authorized) reply = { ok: false, error: "invalid_auth" };
      else if (method === "auth.test") reply = { ok: true, team_id: "T1", user_id: "UBOT" };
      else if (method === "chat.postMessage") {
        this.ts += 1;
        reply = { ok: true, channel: json.channel, ts: `1700000000.${String(this.ts).padStart(6, "0")}` };
      } else reply = { ok: true, channel: json?.channel, ts: json?.ts };
      this.calls.push({ method, body: json, authorized, reply });
      response.setHeader("content-type", "application/json");
      response.end(JSON.stringify(reply));
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  /** Resolves with the first call of `method` matching `matching`. */
  async next(method, matching = () => true) {
    for (;;) {
      const found = this.calls.find((c) => c.method === method && matching(c));
      if (found) return found;
      await new Promise((resolve) => this.waiters.push(resolve));
    }
  }

  close() {
    this.server.close();
  }
}

/** POSTs `payload` to askgate's /slack/interactivity, signed as Slack signs it. */
export async function interact(url, secret, payload) {
  const body = `payload=${encodeURIComponent(JSON.stringify(payload))}`;
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex");
  const response = await fetch(`${url}/slack/interactivity`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      "x-slack-request-timestamp": timestamp,
      "x-slack-signature": `v0=${signature}`,
    },
    body,
  });
  return response.status;
}

/** A message's control whose action id is `actionId` or `actionId.<n>` (an option's
 * button), and whose text is `text` if given. */
export function control(blocks, actionId, text) {
  for (const block of blocks) {
    for (const element of block.elements ?? []) {
      const id = element.action_id ?? "";
      const named = id === actionId || id.startsWith(`${actionId}.`);
      if (named && (text === undefined || element.text?.text === text)) return element;
    }
  }
  throw new Error(`no ${actionId} ${text ?? ""}`);
}

// Slack's emoji, as glyphs any font has (the test machine has no emoji font).
const EMOJI = { white_check_mark: '<span class="ok">✓</span>', no_entry_sign: "⊘", x: "✗", hourglass: "⧗" };

/** Slack's mrkdwn (as askgate writes it: already escaped) to HTML. */
function mrkdwn(text) {
  const blocks = text.split("```");
  return blocks
    .map((part, i) => {
      if (i % 2 === 1) return `<pre>${part}</pre>`;
      return part
        .replace(/`([^`]+)`/g, "<code>$1</code>")
        .replace(/\*([^*\n]+)\*/g, "<b>$1</b>")
        .replace(/(^|[\s(])_([^_\n]+)_/g, "$1<i>$2</i>")
        .replace(/&lt;@(U[A-Z0-9]+)&gt;|<@(U[A-Z0-9]+)>/g, (_, a, b) => `<span class="mention">@${a ?? b}</span>`)
        .replace(/:([a-z_]+):/g, (m, name) => EMOJI[name] ?? m)
        .replace(/\n/g, "<br>");
    })
    .join("");
}

function plain(text) {
  return String(text?.text ?? "").replace(/&/g, "&amp;").replace(/</g, "&lt;");
}

function element(e) {
  switch (e.type) {
    case "button":
      return `<button class="${e.style ?? ""}">${plain(e.text)}</button>`;
    case "checkboxes":
      return `<div class="checks">${e.options
        .map((o) => `<label><input type="checkbox"> <span><b>${plain(o.text)}</b>${o.description ? `<br><small>${plain(o.description)}</small>` : ""}</span></label>`)
        .join("")}</div>`;
    default:
      return `<button>${plain(e.placeholder) || e.type}</button>`;
  }
}

function block(b) {
  switch (b.type) {
    case "header":
      return `<h2>${plain(b.text)}</h2>`;
    case "section":
      return `<p>${mrkdwn(b.text.text)}</p>`;
    case "context":
      return `<p class="context">${b.elements.map((e) => mrkdwn(e.text)).join(" ")}</p>`;
    case "divider":
      return "<hr>";
    case "actions":
      return `<div class="actions">${b.elements.map(element).join("")}</div>`;
    default:
      return "";
  }
}

/** A page showing `blocks` as a message of the askgate app in #channel. */
export function preview(blocks, channel = "questions") {
  return `<!doctype html><meta charset="utf-8"><style>
    body { font: 15px/1.46 Lato, "Helvetica Neue", Arial, sans-serif; color: #1d1c1d; margin: 0; background: #fff; }
    .channel { border-bottom: 1px solid #ddd; padding: 12px 20px; font-weight: 900; }
    .message { display: flex; gap: 8px; padding: 16px 20px; }
    .avatar { width: 36px; height: 36px; border-radius: 6px; background: #2457d6; color: #fff; display: grid; place-items: center; font-weight: 900; flex: none; }
    .who b { margin-right: 4px; } .app { font-size: 10px; background: #ddd; padding: 1px 3px; border-radius: 2px; color: #555; }
    .time { color: #616061; font-size: 12px; margin-left: 6px; }
    h2 { font-size: 18px; margin: 4px 0; } p { margin: 4px 0; } .context { color: #616061; font-size: 13px; }
    code { color: #c01343; background: #f6f6f6; border: 1px solid #ddd; border-radius: 3px; padding: 0 3px; font-size: 12px; }
    pre { background: #f8f8f8; border: 1px solid #ddd; border-radius: 4px; padding: 8px; margin: 4px 0; white-space: pre-wrap; font-size: 12px; }
    .actions { display: flex; flex-wrap: wrap; gap: 8px; margin: 8px 0; }
    button { font: inherit; font-size: 14px; font-weight: 700; background: #fff; border: 1px solid #bbb; border-radius: 4px; padding: 3px 12px; }
    button.primary { background: #007a5a; color: #fff; border-color: #007a5a; } button.danger { color: #e01e5a; border-color: #e01e5a; }
    .checks label { display: flex; gap: 6px; margin: 4px 0; } small { color: #616061; }
    .body { flex: 1; } .ok { color: #fff; background: #2eb67d; border-radius: 3px; padding: 0 3px; font-weight: 900; }
    .mention { background: #e8f5fa; color: #1264a3; border-radius: 3px; padding: 0 2px; } hr { border: 0; border-top: 1px solid #ddd; }
  </style>
  <div class="channel"># ${channel}</div>
  <div class="message"><div class="avatar">a</div><div class="body">
    <div class="who"><b>askgate</b><span class="app">APP</span><span class="time">10:42 AM</span></div>
    ${blocks.map(block).join("\n")}
  </div></div>`;
}
