// Signing in to the console with the company's identity provider, end to end: a real
// OpenID provider (oidc-provider, started here), a real askgate (`--oidc-issuer`),
// headless Chromium, and real asking processes. It checks what the flow promises: the
// code flow with PKCE lands in the inbox with the person's name; answers given there
// are the `console` channel's and the person's; a bearer credential over gRPC-Web is
// not the console, and the session cookie alone (without its CSRF token) is nothing;
// signing out ends it; a person outside the mapped groups is not let in; and after the
// provider rotates its signing key, the next sign-in still works.

import assert from "node:assert/strict";
import { test } from "node:test";
import { AskgateError, Client } from "@askgate/client/core";
import { createGrpcWebTransport } from "@connectrpc/connect-node";
import { Harness, question, screenshot, tempFile } from "./harness.mjs";
import { CLIENT_ID, CLIENT_SECRET, IdentityProvider, freePort, signInAtProvider } from "./idp.mjs";

/** askgate with JWT auth for the agents and the provider's sign-in for the console. */
async function setUp(t) {
  const h = new Harness();
  t.after(() => h.close());
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const idp = await IdentityProvider.start(`${origin}/console/callback`);
  t.after(() => idp.close());
  const secret = tempFile("jwt.secret", "signin-test-secret-at-least-32-bytes-long!!");
  const clientSecret = tempFile("client.secret", `${CLIENT_SECRET}\n`);
  const url = await h.serve(
    [
      "--auth", "jwt", "--jwt-secret-file", secret,
      "--oidc-issuer", idp.issuer,
      "--oidc-client-id", CLIENT_ID,
      "--oidc-client-secret-file", clientSecret,
      "--oidc-tenant", "acme",
      "--oidc-role-map", "ops=ui,sre=admin",
    ],
    { listen: `127.0.0.1:${port}` },
  );
  assert.equal(url, origin);
  const mint = async (sub, roles) =>
    (await h.run(["token", "--secret-file", secret, "--tenant", "acme", "--sub", sub, "--roles", roles])).trim();
  return { h, url, idp, mint };
}

/** A fresh browser context's page, signed in at the provider as `login`. */
async function signIn(h, url, idp, login) {
  const page = await h.page();
  await page.goto(`${url}/console/`);
  await page.getByTestId("sign-in-provider").click();
  await signInAtProvider(page, idp, login);
  return page;
}

function shows(page, testId, text) {
  return page.getByTestId(testId).filter({ hasText: text }).waitFor();
}

/** A gRPC-Web client of `url` that sends `headers` with every call (as a script would). */
function grpcWebClient(url, headers, token) {
  const transport = createGrpcWebTransport({
    baseUrl: url,
    httpVersion: "1.1",
    // A connection of its own per call: a refused call is answered before its body is
    // read, after which the server closes that connection.
    nodeOptions: { agent: false },
    interceptors: [
      (next) => (request) => {
        for (const [name, value] of Object.entries(headers)) request.header.set(name, value);
        return next(request);
      },
    ],
  });
  return new Client(transport, { token });
}

test("people sign in at the identity provider; their answers are the console's", async (t) => {
  const { h, url, idp, mint } = await setUp(t);
  const agentToken = await mint("deploy-bot", "agent");

  const page = await h.page();
  await page.goto(`${url}/console/`);
  await page.getByTestId("sign-in-provider").waitFor();
  await screenshot(page, "signin-01-provider");
  await page.getByTestId("sign-in-provider").click();
  await signInAtProvider(page, idp, "ana");
  await shows(page, "signed-in-as", "Signed in as Ana Lima");
  await shows(page, "connection", "Connected");
  assert.equal(new URL(page.url()).hash, "#/inbox");
  await shows(page, "whoami", "ana · tenant acme · roles ui · sees every session");

  // The session cookie is HttpOnly and SameSite=Strict; the page never sees it.
  const cookies = await page.context().cookies(url);
  const session = cookies.find((c) => c.name === "askgate_session");
  assert.ok(session, `a session cookie: ${JSON.stringify(cookies.map((c) => c.name))}`);
  assert.equal(session.httpOnly, true);
  assert.equal(session.sameSite, "Strict");
  assert.equal(await page.evaluate(() => document.cookie.includes("askgate_session")), false);

  // Only the console may answer this: the person answers it there.
  const consoleOnly = {
    sessionId: "deploys",
    questions: [question("go", "Deploy api to prod?", ["Approve", "Reject"], { header: "Deploy" })],
    allowedChannels: ["console"],
  };
  const first = h.ask(url, consoleOnly, ["--token", agentToken]);
  await page.getByTestId("batch").click();
  await screenshot(page, "signin-02-signed-in");
  await page.getByRole("button", { name: /^Approve/ }).click();
  await page.getByTestId("review").waitFor();
  await page.keyboard.press("Enter");
  const answered = await first.result();
  assert.equal(answered.code, 0, answered.stderr);
  assert.deepEqual(answered.json.answers, [{ id: "go", selected: ["Approve"] }]);
  assert.equal(answered.json.resolved_by, "ana", JSON.stringify(answered.json));

  // A `ui` token over gRPC-Web is not the console, whatever the transport.
  const second = h.ask(url, { ...consoleOnly, questions: [question("go", "And to eu?", ["Approve"])] }, [
    "--token",
    agentToken,
  ]);
  await page.getByTestId("batch").waitFor();
  const [pending] = await grpcWebClient(url, {}, await mint("script", "ui")).listPending("deploys");
  assert.ok(pending, "the second ask is pending");
  const byToken = await grpcWebClient(url, {}, await mint("script", "ui"))
    .answer("deploys", pending.rpcId, [{ id: "go", selected: ["Approve"] }])
    .then(() => undefined, (error) => error);
  assert.equal(AskgateError.from(byToken).reason, "CHANNEL_NOT_ALLOWED", String(byToken));

  // The session cookie without its CSRF token is refused; with it, it is the person.
  const cookie = `askgate_session=${session.value}`;
  const { csrf } = await page.evaluate(() => fetch("/console/session").then((r) => r.json()));
  const noCsrf = await grpcWebClient(url, { cookie })
    .listPending("deploys")
    .then(() => undefined, (error) => error);
  assert.equal(AskgateError.from(noCsrf).reason, "UNAUTHENTICATED", String(noCsrf));
  assert.match(AskgateError.from(noCsrf).rawMessage, /x-askgate-csrf/);
  await grpcWebClient(url, { cookie, "x-askgate-csrf": csrf }).answer("deploys", pending.rpcId, [
    { id: "go", selected: ["Approve"] },
  ]);
  const viaSession = await second.result();
  assert.equal(viaSession.code, 0, viaSession.stderr);
  assert.equal(viaSession.json.resolved_by, "ana");

  // Signing out ends the session in this browser: the provider's sign-in shows again.
  await page.getByTestId("sign-out").click();
  await page.getByTestId("sign-in-provider").waitFor();
  assert.equal(await page.evaluate(() => fetch("/console/session").then((r) => r.status)), 401);
  assert.equal((await page.context().cookies(url)).some((c) => c.name === "askgate_session"), false);
});

test("a person outside the mapped groups is not let in; a rotated provider key is followed", async (t) => {
  const { h, url, idp } = await setUp(t);

  const outsider = await signIn(h, url, idp, "cy");
  await shows(outsider, "sign-in-refused", "Cy Diaz signed in, but is in none of the groups this console admits");
  await screenshot(outsider, "signin-03-not-admitted");
  assert.equal((await outsider.context().cookies(url)).some((c) => c.name === "askgate_session"), false);
  assert.equal((await outsider.request.get(`${url}/console/session`)).status(), 401);

  // The provider starts again with a new signing key; askgate holds only the old one
  // until the next sign-in names the new kid.
  const [before] = idp.kids;
  await idp.restart();
  assert.notEqual(idp.kids.at(-1), before);
  const page = await signIn(h, url, idp, "bo");
  await shows(page, "signed-in-as", "Signed in as Bo Berg");
  await shows(page, "whoami", "bo · tenant acme · roles admin · sees every session");
  await shows(page, "connection", "Connected");
});
