// The console's entry. The page URL names what to show: `#/inbox` (every session the
// credential may see), `#/sessions/<id>` (one session), anything else the sign-in
// form. Either may carry a token (`?token=...`): it is taken out of the address bar at
// once and kept for this tab only (sessionStorage), so it is not bookmarked, shared or
// shown on screen; a URL fragment never reaches a server.

import { InboxView } from "./inbox.js";
import { Session } from "./session.js";
import { View } from "./view.js";

const TOKEN_KEY = "askgate.token";

export type Route =
  | { page: "inbox"; token?: string }
  | { page: "session"; sessionId: string; token?: string }
  | { page: "sign-in" };

/** `#/inbox[?token=<token>]` or `#/sessions/<id>[?token=<token>]`; ids may contain `/`. */
export function parseHash(hash: string): Route {
  const inbox = /^#\/inbox\/?(?:\?(.*))?$/.exec(hash);
  if (inbox) return { page: "inbox", token: tokenOf(inbox[1]) };
  const session = /^#\/sessions\/([^?]+)(?:\?(.*))?$/.exec(hash);
  if (session) {
    return { page: "session", sessionId: decodeURIComponent(session[1]), token: tokenOf(session[2]) };
  }
  return { page: "sign-in" };
}

function tokenOf(query: string | undefined): string | undefined {
  return new URLSearchParams(query ?? "").get("token") ?? undefined;
}

/** The route without its token, for the address bar. */
function hashOf(route: Route): string {
  switch (route.page) {
    case "inbox":
      return "#/inbox";
    case "session":
      return `#/sessions/${encodeURIComponent(route.sessionId).replace(/%2F/g, "/")}`;
    case "sign-in":
      return "#/";
  }
}

/** The sign-in form: a token (if the server requires one), and optionally one session. */
function signIn(root: HTMLElement): void {
  const form = document.createElement("form");
  form.className = "card chooser";
  form.innerHTML = `
    <h1>askgate console</h1>
    <p class="muted">Answer the questions agents ask: every session you may see in the inbox, or one session.</p>
    <label class="text-label" for="token">Token: an API key or JWT (if the server requires one)</label>
    <input class="text" id="token" name="token" type="password" autocomplete="off" data-testid="sign-in-token">
    <label class="text-label" for="session">Session id (optional: empty opens the inbox)</label>
    <input class="text" id="session" name="session" autocomplete="off" pattern="[A-Za-z0-9._:@/\\-]{1,128}">
    <p class="muted">The token stays in this tab only, and is forgotten when the tab closes.</p>
    <div class="actions"><button class="primary" type="submit" data-testid="sign-in">Open</button></div>`;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const session = String(data.get("session") ?? "").trim();
    const token = String(data.get("token") ?? "").trim();
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    location.hash = session ? hashOf({ page: "session", sessionId: session }) : "#/inbox";
  });
  root.replaceChildren(form);
  form.querySelector<HTMLInputElement>("#token")?.focus();
}

/** Forgets the token and shows the sign-in form. */
function signOut(): void {
  sessionStorage.removeItem(TOKEN_KEY);
  location.hash = "#/";
}

let running: { session: Session; view: View } | undefined;

function start(): void {
  const root = document.getElementById("app");
  if (!root) return;
  running?.session.stop();
  running?.view.dispose();
  running = undefined;
  const route = parseHash(location.hash);
  if (route.page === "sign-in") {
    document.title = "askgate console";
    signIn(root);
    return;
  }
  if (route.token !== undefined) {
    sessionStorage.setItem(TOKEN_KEY, route.token);
    history.replaceState(null, "", hashOf(route));
  }
  const token = sessionStorage.getItem(TOKEN_KEY) || undefined;
  let view: View | undefined;
  let inbox: InboxView | undefined;
  const session = new Session({
    baseUrl: location.origin,
    sessionId: route.page === "session" ? route.sessionId : undefined,
    token,
    onChange: () => view?.render(),
    onArrival: (composer) => inbox?.arrived(composer),
  });
  if (route.page === "inbox") {
    inbox = new InboxView(root, session, signOut);
    view = inbox;
    void session.identify();
  } else {
    document.title = `askgate · ${route.sessionId}`;
    view = new View(root, session);
  }
  view.render();
  running = { session, view };
  void session.run();
}

window.addEventListener("hashchange", start);
start();
