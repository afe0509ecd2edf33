// The console's entry: the page URL names the session (#/sessions/<id>) and may carry
// a token (#/sessions/<id>?token=...). The token is taken out of the address bar at
// once and kept for this tab only (sessionStorage), so it is not bookmarked, shared
// or shown on screen; a URL fragment never reaches a server.

import { Session } from "./session.js";
import { View } from "./view.js";

const TOKEN_KEY = "askgate.token";

interface Target {
  sessionId: string;
  token?: string;
}

/** `#/sessions/<id>[?token=<token>]`; ids may contain `/`, so the id is the rest. */
export function parseHash(hash: string): { sessionId?: string; token?: string } {
  const match = /^#\/sessions\/([^?]+)(?:\?(.*))?$/.exec(hash);
  if (!match) return {};
  const params = new URLSearchParams(match[2] ?? "");
  return {
    sessionId: decodeURIComponent(match[1]),
    token: params.get("token") ?? undefined,
  };
}

function target(): Target | undefined {
  const { sessionId, token } = parseHash(location.hash);
  if (!sessionId) return undefined;
  if (token !== undefined) {
    sessionStorage.setItem(TOKEN_KEY, token);
    history.replaceState(null, "", `#/sessions/${encodeURIComponent(sessionId).replace(/%2F/g, "/")}`);
  }
  return { sessionId, token: sessionStorage.getItem(TOKEN_KEY) || undefined };
}

/** Without a session in the URL: a form that puts one there. */
function chooser(root: HTMLElement): void {
  const form = document.createElement("form");
  form.className = "card chooser";
  form.innerHTML = `
    <h1>askgate console</h1>
    <p class="muted">Answer the questions agents ask in a session.</p>
    <label class="text-label" for="session">Session id</label>
    <input class="text" id="session" name="session" required autocomplete="off" pattern="[A-Za-z0-9._:@/\\-]{1,128}">
    <label class="text-label" for="token">Token (API key or JWT, if the server requires one)</label>
    <input class="text" id="token" name="token" type="password" autocomplete="off">
    <div class="actions"><button class="primary" type="submit">Open</button></div>`;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const session = String(data.get("session") ?? "").trim();
    const token = String(data.get("token") ?? "").trim();
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    location.hash = `#/sessions/${session}`;
  });
  root.replaceChildren(form);
  form.querySelector<HTMLInputElement>("#session")?.focus();
}

let running: Session | undefined;

function start(): void {
  const root = document.getElementById("app");
  if (!root) return;
  running?.stop();
  running = undefined;
  const where = target();
  if (!where) {
    chooser(root);
    return;
  }
  document.title = `askgate · ${where.sessionId}`;
  let view: View | undefined;
  const session = new Session({
    baseUrl: location.origin,
    sessionId: where.sessionId,
    token: where.token,
    onChange: () => view?.render(),
  });
  view = new View(root, session);
  view.render();
  running = session;
  void session.run();
}

window.addEventListener("hashchange", start);
start();
