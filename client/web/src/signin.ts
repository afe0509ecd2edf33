// Signing in with the company's identity provider, on a server that has it
// (`askgate serve --oidc-issuer`): the server keeps the session in an HttpOnly cookie
// the page never sees, and tells the page who is signed in and the CSRF token its
// calls must carry (GET /console/session). A server without it answers 404 there, and
// the console signs in with a pasted token instead.

import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";

/** Who is signed in, as GET /console/session says. */
export interface ConsoleSession {
  subject: string;
  /** The person's name, as the identity provider gives it. */
  name: string;
  tenant: string;
  roles: string[];
  groups: string[];
  /** Seconds since the epoch at which the session ends. */
  expiresAt: number;
  /** What every call carries in `x-askgate-csrf`. */
  csrf: string;
}

/** How this server signs the console in. */
export type SignInMode =
  | { kind: "token" }
  | { kind: "provider"; session?: ConsoleSession }
  | { kind: "unreachable"; why: string };

/** Where the sign-in starts: the server sends the browser on to the identity provider. */
export const LOGIN_PATH = "/console/login";

/** The header a console session's calls carry the CSRF token in. */
const CSRF_HEADER = "x-askgate-csrf";

/** Asks the server how the console signs in, and whether a session is open. */
export async function signInMode(): Promise<SignInMode> {
  let response: Response;
  try {
    response = await fetch("/console/session", { credentials: "same-origin", cache: "no-store" });
  } catch (error) {
    return { kind: "unreachable", why: error instanceof Error ? error.message : String(error) };
  }
  if (response.status === 404) return { kind: "token" };
  if (response.status === 401) return { kind: "provider" };
  if (!response.ok) return { kind: "unreachable", why: `the server answered ${response.status}` };
  const body = (await response.json()) as Record<string, unknown>;
  return {
    kind: "provider",
    session: {
      subject: String(body.subject ?? ""),
      name: String(body.name ?? body.subject ?? ""),
      tenant: String(body.tenant ?? ""),
      roles: Array.isArray(body.roles) ? body.roles.map(String) : [],
      groups: Array.isArray(body.groups) ? body.groups.map(String) : [],
      expiresAt: Number(body.expires_at ?? 0),
      csrf: String(body.csrf ?? ""),
    },
  };
}

/** The gRPC-Web transport to `baseUrl`, carrying a console session's CSRF token if given. */
export function transport(baseUrl: string, csrf?: string): Transport {
  const interceptors: Interceptor[] =
    csrf === undefined
      ? []
      : [
          (next) => (request) => {
            request.header.set(CSRF_HEADER, csrf);
            return next(request);
          },
        ];
  return createGrpcWebTransport({ baseUrl, interceptors });
}

/** Ends the console session in this browser. */
export async function logOut(csrf: string): Promise<void> {
  await fetch("/console/logout", {
    method: "POST",
    credentials: "same-origin",
    headers: { [CSRF_HEADER]: csrf },
  });
}

/**
 * The sign-in page of a server with an identity provider: one way in, through it.
 * `why`: what ended the last session, shown above.
 */
export function providerSignIn(root: HTMLElement, why?: string): void {
  const card = document.createElement("div");
  card.className = "card chooser";
  const title = document.createElement("h1");
  title.textContent = "askgate console";
  const reason = document.createElement("p");
  reason.className = "error";
  reason.setAttribute("role", "alert");
  reason.dataset.testid = "sign-in-why";
  reason.hidden = why === undefined;
  reason.textContent = why ?? "";
  const about = document.createElement("p");
  about.className = "muted";
  about.textContent =
    "Answer the questions agents ask. Sign in with your organization's account: this server lets in the groups its administrator chose.";
  const actions = document.createElement("div");
  actions.className = "actions";
  const link = document.createElement("a");
  link.className = "button primary";
  link.href = LOGIN_PATH;
  link.dataset.testid = "sign-in-provider";
  link.textContent = "Sign in";
  actions.append(link);
  card.append(title, reason, about, actions);
  root.replaceChildren(card);
  link.focus();
}
