// The console's entry. The page URL names what to show: `#/inbox` (every session the
// credential may see), `#/sessions/<id>` (one session), anything else the sign-in
// form. Either may carry a token (`?token=...`): it is taken out of the address bar at
// once and kept for this tab only (sessionStorage), so it is not bookmarked, shared or
// shown on screen; a URL fragment never reaches a server. On a server that signs in
// with an identity provider there is no token: the server holds the session in a
// cookie, and the page signs in there (signin.ts).

import { AskgateError, Client } from "@askgate/client/core";
import { createGrpcWebTransport } from "@connectrpc/connect-web";

import { InboxView } from "./inbox.js";
import { Session } from "./session.js";
import { type ConsoleSession, logOut, providerSignIn, signInMode } from "./signin.js";
import { View } from "./view.js";

const TOKEN_KEY = "askgate.token";

export type Route =
  | { page: "inbox"; token?: string; batch?: string }
  | { page: "session"; sessionId: string; token?: string; batch?: string }
  | { page: "sign-in" };

/**
 * `#/inbox[?…]` or `#/sessions/<id>[?…]` (ids may contain `/`), with `batch=<rpc_id>`
 * (the batch open in the composer: a deep link that survives a reload) and
 * `token=<token>` in the query.
 */
export function parseHash(hash: string): Route {
  const inbox = /^#\/inbox\/?(?:\?(.*))?$/.exec(hash);
  if (inbox) return { page: "inbox", ...queryOf(inbox[1]) };
  const session = /^#\/sessions\/([^?]+)(?:\?(.*))?$/.exec(hash);
  if (session) {
    return { page: "session", sessionId: decodeURIComponent(session[1]), ...queryOf(session[2]) };
  }
  return { page: "sign-in" };
}

function queryOf(query: string | undefined): { token?: string; batch?: string } {
  const params = new URLSearchParams(query ?? "");
  return { token: params.get("token") ?? undefined, batch: params.get("batch") || undefined };
}

/** The route without its token, for the address bar. */
function hashOf(route: Route): string {
  const batch = route.page !== "sign-in" && route.batch ? `?batch=${encodeURIComponent(route.batch)}` : "";
  switch (route.page) {
    case "inbox":
      return `#/inbox${batch}`;
    case "session":
      return `#/sessions/${encodeURIComponent(route.sessionId).replace(/%2F/g, "/")}${batch}`;
    case "sign-in":
      return "#/";
  }
}

/**
 * The sign-in form: a token (if the server requires one), and optionally one session.
 * `refused`: the server refused the credential of `then` (the page that was asked for),
 * which the form opens once signed in.
 */
function signIn(root: HTMLElement, refused?: { why: string; then: Route }): void {
  const form = document.createElement("form");
  form.className = "card chooser";
  form.innerHTML = `
    <h1>askgate console</h1>
    <p class="error" role="alert" data-testid="sign-in-why" hidden></p>
    <p class="muted">Answer the questions agents ask: every session you may see in the inbox, or one session.</p>
    <label class="text-label" for="token">Token: an API key or a JWT with the ui role</label>
    <input class="text" id="token" name="token" type="password" autocomplete="off" data-testid="sign-in-token">
    <label class="text-label" for="session">Session id (optional: empty opens the inbox)</label>
    <input class="text" id="session" name="session" autocomplete="off" pattern="[A-Za-z0-9._:@/\\-]{1,128}">
    <p class="muted">The token stays in this tab only, and is forgotten when the tab closes.</p>
    <div class="actions"><button class="primary" type="submit" data-testid="sign-in">Open</button></div>`;
  const why = form.querySelector<HTMLElement>("[data-testid=sign-in-why]");
  if (refused && why) {
    why.textContent = refused.why;
    why.hidden = false;
  }
  if (refused?.then.page === "session") {
    form.querySelector<HTMLInputElement>("#session")!.value = refused.then.sessionId;
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const session = String(data.get("session") ?? "").trim();
    const token = String(data.get("token") ?? "").trim();
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    const next = session ? hashOf({ page: "session", sessionId: session }) : "#/inbox";
    // The same page again fires no hashchange: open it here.
    if (location.hash === next) void start();
    else location.hash = next;
  });
  root.replaceChildren(form);
  form.querySelector<HTMLInputElement>("#token")?.focus();
}

/** What the sign-in form says when the server needs a credential this tab does not hold. */
const NEEDS_A_TOKEN =
  "This server needs a token (an API key or a JWT) to show its questions: it runs with " +
  "--auth. Sign in with one that has the ui role (an admin makes it with `askgate keys add " +
  "--roles ui` or `askgate token --roles ui`).";

/**
 * The console's front door (`#/`, the address `askgate serve` prints): straight to the
 * inbox when the server takes this tab as it is (no authentication on a loopback
 * server, or a token the tab already holds), else the sign-in form saying why it is
 * there. WhoAmI decides: it is what any credential, or none, may call.
 */
async function land(root: HTMLElement): Promise<void> {
  const token = sessionStorage.getItem(TOKEN_KEY) || undefined;
  const client = new Client(createGrpcWebTransport({ baseUrl: location.origin }), { token });
  const waiting = document.createElement("p");
  waiting.className = "muted";
  waiting.textContent = "Connecting…";
  root.replaceChildren(waiting);
  let why: string | undefined;
  try {
    await client.whoAmI();
  } catch (thrown) {
    const error = AskgateError.from(thrown);
    if (error.reason === "UNAUTHENTICATED") {
      if (token !== undefined) sessionStorage.removeItem(TOKEN_KEY);
      why = refusal(token !== undefined);
    } else {
      why = `The server cannot be reached (${error.rawMessage}). Sign in to try again.`;
    }
  } finally {
    client.close();
  }
  // A page chosen meanwhile wins.
  if (parseHash(location.hash).page !== "sign-in" || !root.contains(waiting)) return;
  if (why === undefined) {
    location.hash = "#/inbox";
    return;
  }
  signIn(root, { why, then: { page: "inbox" } });
}

/** Whether two routes show the same page (whatever batch or token they name). */
function samePage(a: Route, b: Route): boolean {
  if (a.page === "session" && b.page === "session") return a.sessionId === b.sessionId;
  return a.page === b.page;
}

/** What the sign-in form says when the server refused the credential. */
function refusal(hadToken: boolean): string {
  return hadToken
    ? "The server did not accept this token. Sign in with another one."
    : NEEDS_A_TOKEN;
}

/** Forgets the token and shows the sign-in form. */
function signOut(): void {
  sessionStorage.removeItem(TOKEN_KEY);
  location.hash = "#/";
}

/** Ends the console session at the server, then shows the identity provider's sign-in. */
function signOutOf(signedIn: ConsoleSession): () => void {
  return () => {
    running?.session.stop();
    void logOut(signedIn.csrf).finally(() => {
      if (location.hash === "#/") void start();
      else location.hash = "#/";
    });
  };
}

let running: { session: Session; view: View } | undefined;
/** Counts starts: a start overtaken by a later one (a hash changed meanwhile) stops. */
let starts = 0;

async function start(): Promise<void> {
  const root = document.getElementById("app");
  if (!root) return;
  const mine = ++starts;
  running?.session.stop();
  running?.view.dispose();
  running = undefined;
  const route = parseHash(location.hash);
  const mode = await signInMode();
  if (mine !== starts) return;
  if (mode.kind === "provider") {
    document.title = "askgate console";
    if (mode.session === undefined) {
      providerSignIn(root);
      return;
    }
    if (route.page === "sign-in") {
      location.hash = "#/inbox";
      return;
    }
    follow(root, route, { signedIn: mode.session });
    return;
  }
  if (route.page === "sign-in") {
    document.title = "askgate console";
    void land(root);
    return;
  }
  if (route.token !== undefined) {
    sessionStorage.setItem(TOKEN_KEY, route.token);
    history.replaceState(null, "", hashOf(route));
  }
  follow(root, route, { token: sessionStorage.getItem(TOKEN_KEY) || undefined });
}

/** Shows `route` (the inbox or one session), following it with the tab's credential. */
function follow(
  root: HTMLElement,
  route: Exclude<Route, { page: "sign-in" }>,
  { token, signedIn }: { token?: string; signedIn?: ConsoleSession },
): void {
  let view: View | undefined;
  let inbox: InboxView | undefined;
  // The batch in the address bar: the one open, so that a reload opens it again.
  let shown = route.batch;
  const session: Session = new Session({
    baseUrl: location.origin,
    sessionId: route.page === "session" ? route.sessionId : undefined,
    token,
    csrf: signedIn?.csrf,
    person: signedIn?.name,
    opened: route.batch,
    onChange: () => {
      // A page left behind (another route started since, or the address already names
      // another page whose hashchange has not run yet) changes nothing, least of all
      // the address bar.
      if (running?.session !== session || !samePage(parseHash(location.hash), route)) return;
      const connection = session.connection;
      if (connection.kind === "refused" && connection.unauthenticated) {
        // No (or a refused) credential: the sign-in form, not an error with a way out.
        sessionStorage.removeItem(TOKEN_KEY);
        session.stop();
        view?.dispose();
        running = undefined;
        history.replaceState(null, "", "#/");
        document.title = "askgate console";
        if (signedIn !== undefined) providerSignIn(root, "Your console session has ended. Sign in again.");
        else signIn(root, { why: refusal(token !== undefined), then: route });
        return;
      }
      view?.render();
      const open = session.current?.batch.rpcId;
      if (open !== shown && (session.connection.kind === "connected" || open !== undefined)) {
        shown = open;
        history.replaceState(null, "", hashOf({ ...route, batch: open }));
      }
    },
    onArrival: (composer) => inbox?.arrived(composer),
  });
  if (route.page === "inbox") {
    inbox = new InboxView(root, session, signedIn !== undefined ? signOutOf(signedIn) : signOut);
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

window.addEventListener("hashchange", () => void start());
void start();
