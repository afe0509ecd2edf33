// The inbox (#/inbox) end to end: a real askgate, real asking processes in several
// sessions, headless Chromium. Each test asserts what the asking agents received, not
// only what the page shows, and saves a screenshot of each state it passes through.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Harness, question, screenshot, tempFile } from "./harness.mjs";

/** A server with JWT auth, and a way to mint its tokens. */
async function authServer(h) {
  const secret = tempFile("jwt.secret", "inbox-test-secret-at-least-32-bytes-long!!");
  const url = await h.serve(["--auth", "jwt", "--jwt-secret-file", secret]);
  const mint = async (sub, roles, sessions) => {
    const args = ["token", "--secret-file", secret, "--tenant", "acme", "--sub", sub, "--roles", roles];
    if (sessions) args.push("--sessions", sessions);
    return (await h.run(args)).trim();
  };
  return { url, mint };
}

/** The sessions of the listed batches, top to bottom. */
function listed(page) {
  return page.getByTestId("batch").evaluateAll((rows) => rows.map((row) => row.dataset.session));
}

/** Waits until the list shows exactly `sessions`, top to bottom. */
async function listShows(page, sessions) {
  await page.waitForFunction(
    (want) =>
      JSON.stringify([...document.querySelectorAll('[data-testid="batch"]')].map((r) => r.dataset.session)) ===
      JSON.stringify(want),
    sessions,
  );
}

/** A server without authentication, and a page on its inbox, connected. */
async function openInbox(t, viewport) {
  const h = new Harness();
  t.after(() => h.close());
  const url = await h.serve();
  const page = await h.page(viewport);
  await page.goto(`${url}/console/#/inbox`);
  await shows(page, "connection", "Connected");
  return { h, url, page };
}

/** A console page of `url` signed in with a `ui` token `mint` makes for `sub`. */
async function signInAs(h, url, mint, sub) {
  const page = await h.page();
  await page.goto(`${url}/console/`);
  await page.getByTestId("sign-in-token").fill(await mint(sub, "ui"));
  await page.getByTestId("sign-in").click();
  await shows(page, "connection", "Connected");
  return page;
}

/** Opens the first batch on `page`, chooses Approve and sends it from the review. */
async function approveFirst(page) {
  await page.getByTestId("batch").click();
  await page.getByRole("button", { name: /^Approve/ }).click();
  await page.getByTestId("review").waitFor();
  await page.keyboard.press("Enter");
}

function shows(page, testId, text) {
  return page.getByTestId(testId).filter({ hasText: text }).waitFor();
}

/** An ask in `session`, held until answered, with labels. */
function asking(h, url, session, text, { labels = {}, token, options = ["yes", "no"] } = {}) {
  return h.ask(
    url,
    { sessionId: session, questions: [question("q", text, options)], labels },
    token ? ["--token", token] : [],
  );
}

test("questions from several sessions arrive in order; filters, order and the tab title", async (t) => {
  const { h, url, page } = await openInbox(t);
  await shows(page, "inbox-empty", "Nothing waiting");

  const agents = [];
  const sessions = [];
  for (const [session, text, labels] of [
    ["team-a/build", "Ship the release?", { team: "a", env: "prod" }],
    ["team-b/docs", "Publish the docs?", { team: "b" }],
    ["team-a/db", "Run the migration?", { team: "a" }],
  ]) {
    agents.push(asking(h, url, session, text, { labels }));
    sessions.push(session);
    // One at a time, so that their order is the order they were asked in.
    await listShows(page, sessions);
  }
  assert.equal(await page.title(), "(3) askgate inbox");
  await shows(page, "batch", "Publish the docs?");
  await page.getByTestId("batch").filter({ hasText: "team=b" }).waitFor();
  await screenshot(page, "inbox-01-list");

  await page.getByTestId("order").selectOption("newest");
  await listShows(page, ["team-a/db", "team-b/docs", "team-a/build"]);
  await page.getByTestId("order").selectOption("oldest");

  await page.getByTestId("filter-session").fill("team-a");
  await listShows(page, ["team-a/build", "team-a/db"]);
  await page.getByTestId("filter-label").fill("env=prod");
  await listShows(page, ["team-a/build"]);
  await page.getByTestId("filter-session").fill("");
  await page.getByTestId("filter-label").fill("team=b");
  await listShows(page, ["team-b/docs"]);
  await page.getByTestId("filter-label").fill("nobody");
  await shows(page, "inbox-empty", "No batch matches");
  await screenshot(page, "inbox-02-filtered");
  await page.getByTestId("filter-label").fill("");
  await listShows(page, sessions);
  assert.equal(await page.title(), "(3) askgate inbox", "the title counts every batch, filtered or not");

  for (const agent of agents) agent.child.kill("SIGTERM");
});

test("answering and cancelling from the inbox with the keyboard; Esc comes back; the recent list", async (t) => {
  const { h, url, page } = await openInbox(t);
  const first = asking(h, url, "north", "Deploy north?");
  await listShows(page, ["north"]);
  const second = asking(h, url, "south", "Deploy south?", { options: ["now", "later"] });
  await listShows(page, ["north", "south"]);

  // j moves down, k up, Enter opens the highlighted batch.
  await page.keyboard.press("j");
  assert.equal(await page.locator(".row.selected").getAttribute("data-session"), "south");
  await page.keyboard.press("k");
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("Enter");
  await page.getByTestId("composer").filter({ hasText: "Deploy south?" }).waitFor();
  await screenshot(page, "inbox-03-opened");
  await page.keyboard.press("Escape");
  await page.getByTestId("inbox").waitFor();
  assert.equal(await page.locator(".row.selected").getAttribute("data-session"), "south", "the highlight stays");

  await page.keyboard.press("Enter");
  await page.getByRole("button", { name: /later/ }).click();
  await page.getByTestId("review").waitFor();
  await page.keyboard.press("Enter");
  const { code, json, stderr } = await second.result();
  assert.equal(code, 0, stderr);
  assert.deepEqual(json.answers, [{ id: "q", selected: ["later"] }]);

  // Back in the inbox, with a notice and the batch among the recently resolved.
  await page.getByTestId("inbox").waitFor();
  await shows(page, "notice", "Answer sent");
  await listShows(page, ["north"]);
  await shows(page, "resolved", "Deploy south?");
  assert.equal(await page.title(), "(1) askgate inbox");
  await screenshot(page, "inbox-03-answered");

  // Cancelling from the inbox: the close dialog, a reason, back to the list.
  await page.getByTestId("batch").click();
  await page.getByTestId("close").click();
  await page.getByTestId("reason").fill("not before the freeze ends");
  await page.getByTestId("reason").press("Enter");
  const cancelled = await first.result();
  assert.equal(cancelled.code, 3, `ASK_CANCELLED exits 3: ${cancelled.stderr}`);
  assert.match(cancelled.stderr, /not before the freeze ends/);
  await page.getByTestId("inbox").waitFor();
  await shows(page, "notice", "Cancelled");
  await shows(page, "inbox-empty", "Nothing waiting");
  await shows(page, "resolved", "Cancelled by anonymous: not before the freeze ends");
  assert.equal(await page.getByTestId("resolved").count(), 2);
  assert.equal(await page.title(), "askgate inbox");
});

test("batches resolved elsewhere leave the inbox with a notice saying how and by whom", async (t) => {
  const h = new Harness();
  t.after(() => h.close());
  const { url, mint } = await authServer(h);
  const agentToken = await mint("worker", "agent");
  const ana = await mint("ana@acme", "ui");
  const carol = await mint("carol@acme", "ui");
  const page = await h.page();
  await page.goto(`${url}/console/#/inbox?token=${encodeURIComponent(ana)}`);
  await shows(page, "connection", "Connected");
  assert.equal(new URL(page.url()).hash, "#/inbox", "the token is taken out of the URL");

  const answered = asking(h, url, "ops/1", "Restart the cache?", { token: agentToken });
  await listShows(page, ["ops/1"]);
  const cancelled = asking(h, url, "ops/2", "Rotate the keys?", { token: agentToken });
  await listShows(page, ["ops/1", "ops/2"]);
  const aborted = asking(h, url, "ops/3", "Drop the table?", { token: agentToken });
  await listShows(page, ["ops/1", "ops/2", "ops/3"]);
  const rpcOf = (session) => page.locator(`[data-session="${session}"]`).getAttribute("data-rpc");

  // Answered by someone else while the batch is open in the composer: back to the list.
  await page.locator('[data-session="ops/1"]').click();
  await page.getByTestId("composer").filter({ hasText: "Restart the cache?" }).waitFor();
  await page.getByTestId("back").click();
  const rpc1 = await rpcOf("ops/1");
  await page.locator('[data-session="ops/1"]').click();
  await h.run(["answer", "--addr", url, "--token", carol, "--session", "ops/1", "--rpc-id", rpc1, "--select", "q=yes"]);
  await shows(page, "notice", "Answered elsewhere by carol@acme");
  await page.getByTestId("inbox").waitFor();
  assert.deepEqual((await answered.result()).json.answers, [{ id: "q", selected: ["yes"] }]);
  await screenshot(page, "inbox-04-resolved-elsewhere");

  const rpc2 = await rpcOf("ops/2");
  await h.run([
    "answer", "--addr", url, "--token", carol, "--session", "ops/2", "--rpc-id", rpc2, "--cancel", "--reason", "not today",
  ]);
  await shows(page, "notice", "Cancelled by carol@acme: not today");
  assert.equal((await cancelled.result()).code !== 0, true, "the agent got ASK_CANCELLED");

  aborted.child.kill("SIGTERM");
  await shows(page, "notice", "Aborted");
  await shows(page, "inbox-empty", "Nothing waiting");
  const recent = await page.getByTestId("resolved").allTextContents();
  assert.equal(recent.length, 3, recent.join("\n"));
  assert.match(recent[0], /Drop the table\?.*Aborted/);
  assert.match(recent[1], /Rotate the keys\?.*Cancelled by carol@acme: not today/);
  assert.match(recent[2], /Restart the cache\?.*Answered by carol@acme/);
  await screenshot(page, "inbox-05-recent");
});

test("sign-in shows whose credential it is; a session-scoped one sees only its sessions", async (t) => {
  const h = new Harness();
  t.after(() => h.close());
  const { url, mint } = await authServer(h);
  const agentToken = await mint("worker", "agent");
  const bo = await mint("bo@acme", "ui", "team-a/*");
  const page = await h.page();
  await page.goto(`${url}/console/`);
  await page.getByTestId("sign-in-token").fill(bo);
  await screenshot(page, "inbox-06-sign-in");
  await page.getByTestId("sign-in").click();
  await shows(page, "connection", "Connected");
  assert.equal(new URL(page.url()).hash, "#/inbox");
  await shows(page, "whoami", "bo@acme · tenant acme · roles ui · sees sessions team-a/*");

  // Asked first in a session it may not see: once the later one shows, the earlier
  // one would have too (one ordered stream).
  const hidden = asking(h, url, "team-b/x", "Not for bo?", { token: agentToken });
  const mine = asking(h, url, "team-a/y", "For bo?", { token: agentToken });
  await listShows(page, ["team-a/y"]);
  assert.deepEqual(await listed(page), ["team-a/y"]);
  await page.getByTestId("batch").click();
  await page.getByRole("button", { name: /^yes/ }).click();
  await page.keyboard.press("Enter");
  const { code, json, stderr } = await mine.result();
  assert.equal(code, 0, stderr);
  assert.equal(json.resolved_by, "bo@acme");
  assert.equal(hidden.running(), true, "the other session's agent still waits");

  await page.getByTestId("sign-out").click();
  await page.getByTestId("sign-in-token").waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem("askgate.token")), null);
  hidden.child.kill("SIGTERM");
});

test("a notification for a new batch while the tab is hidden, and the sound toggle", async (t) => {
  const h = new Harness();
  t.after(() => h.close());
  const url = await h.serve();
  const page = await h.page();
  // The browser's side of notifications, sound and visibility, observed: what the page
  // asks of them is recorded.
  await page.addInitScript(() => {
    window.__notes = [];
    window.__chimes = 0;
    window.__hidden = false;
    class RecordedNotification {
      static permission = "default";
      static async requestPermission() {
        RecordedNotification.permission = "granted";
        return "granted";
      }
      constructor(title, options) {
        this.title = title;
        this.body = options?.body;
        window.__notes.push(this);
      }
      close() {}
    }
    window.Notification = RecordedNotification;
    const Audio = window.AudioContext;
    window.AudioContext = class extends Audio {
      createOscillator() {
        window.__chimes += 1;
        return super.createOscillator();
      }
    };
    Object.defineProperty(document, "hidden", { get: () => window.__hidden, configurable: true });
  });
  await page.goto(`${url}/console/#/inbox`);
  await shows(page, "connection", "Connected");
  const before = asking(h, url, "n/0", "Asked before the page opened?");
  await listShows(page, ["n/0"]);

  await page.getByTestId("notifications").click();
  await shows(page, "notifications", "Notifications on");
  await page.evaluate(() => (window.__hidden = true));
  const hiddenAsk = asking(h, url, "n/1", "Asked while hidden?");
  await listShows(page, ["n/0", "n/1"]);
  const notes = await page.evaluate(() => window.__notes.map((n) => [n.title, n.body]));
  assert.deepEqual(notes, [["askgate · n/1", "Asked while hidden?"]]);
  // Clicking the notification opens its batch.
  await page.evaluate(() => window.__notes[0].onclick());
  await page.getByTestId("composer").filter({ hasText: "Asked while hidden?" }).waitFor();
  await page.getByTestId("back").click();

  await page.evaluate(() => (window.__hidden = false));
  assert.equal(await page.evaluate(() => window.__chimes), 0, "sound is off by default");
  await page.getByTestId("sound").click();
  await shows(page, "sound", "Sound on");
  const chimed = await page.evaluate(() => window.__chimes);
  const visibleAsk = asking(h, url, "n/2", "Asked while visible?");
  await listShows(page, ["n/0", "n/1", "n/2"]);
  await page.waitForFunction((n) => window.__chimes > n, chimed);
  assert.equal(await page.evaluate(() => window.__notes.length), 1, "no notification while the tab is visible");
  for (const agent of [before, hiddenAsk, visibleAsk]) agent.child.kill("SIGTERM");
});

test("the inbox fits a phone", async (t) => {
  const { h, url, page } = await openInbox(t, { width: 390, height: 800 });
  const agent = h.ask(url, {
    sessionId: "phone/a-rather-long-session-name-that-must-wrap",
    questions: [question("q", "Merge the pull request once the checks pass?", ["yes", "no"], { header: "Merge" })],
    labels: { repo: "askgate", team: "platform" },
  });
  await page.getByTestId("batch").waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than the phone`);
  await screenshot(page, "inbox-07-phone");
  await page.getByTestId("batch").click();
  await page.getByRole("button", { name: /^yes/ }).click();
  await page.keyboard.press("Enter");
  assert.deepEqual((await agent.result()).json.answers, [{ id: "q", selected: ["yes"] }]);
});

test("first-hour rough edges: sign-in when the server needs a token, deep links, plain words", async (t) => {
  const h = new Harness();
  t.after(() => h.close());
  const { url, mint } = await authServer(h);
  const ui = await mint("ana@acme", "ui");
  const agentToken = await mint("worker", "agent");
  const page = await h.page();

  // No token on a server that needs one: the sign-in form, saying why, and no error
  // with protocol names or a "Sign out" for a credential that was never given.
  await page.goto(`${url}/console/#/inbox`);
  await shows(page, "sign-in-why", "This server needs a token");
  const text = await page.evaluate(() => document.body.innerText);
  assert.doesNotMatch(text, /UNAUTHENTICATED|unauthenticated:/, text);
  assert.equal(await page.getByTestId("sign-out").count(), 0);
  await screenshot(page, "inbox-08-needs-a-token");
  await page.getByTestId("sign-in-token").fill(ui);
  await page.getByTestId("sign-in").click();
  await shows(page, "connection", "Connected");

  // Rows are titled by the first question's header, else by its question; a batch
  // asked a moment ago was asked "just now".
  const headed = h.ask(
    url,
    { sessionId: "deep/a", questions: [question("q", "Merge the pull request?", ["yes", "no"], { header: "Merge" })] },
    ["--token", agentToken],
  );
  // One after the other: two asking processes started together may arrive either way.
  await listShows(page, ["deep/a"]);
  const plain = asking(h, url, "deep/b", "Ship the release today?", { token: agentToken });
  await listShows(page, ["deep/a", "deep/b"]);
  const titles = await page.locator(".row-title").allInnerTexts();
  assert.deepEqual(titles, ["Merge", "Ship the release today?"]);
  const meta = await page.locator(".row-meta").first().innerText();
  assert.match(meta, /just now/, meta);
  assert.doesNotMatch(meta, /\b0 s ago/, meta);

  // Opening a batch gives it its own address, which a reload opens again.
  await page.getByTestId("batch").nth(1).click();
  await page.getByTestId("composer").filter({ hasText: "Ship the release today?" }).waitFor();
  const rpc = await page.getByTestId("composer").getAttribute("data-rpc");
  assert.equal(new URL(page.url()).hash, `#/inbox?batch=${rpc}`);
  await page.reload();
  await page.getByTestId("composer").filter({ hasText: "Ship the release today?" }).waitFor();

  // The keyboard's place on the first option does not look like a choice.
  const first = page.locator("[data-option]").first();
  await first.focus();
  const focusRing = await first.evaluate((e) => getComputedStyle(e).outlineStyle);
  assert.equal(focusRing, "dashed", "a focused option is outlined dashed, unlike a chosen one");
  assert.equal(await first.getAttribute("aria-pressed"), "false");

  // The close dialog says what happens in words, not with a protocol name.
  await page.getByTestId("close").click();
  const what = await page.getByTestId("closing-what").innerText();
  assert.doesNotMatch(what, /ASK_|CANCELLED/, what);
  assert.match(what, /cancelled these questions/);
  await page.keyboard.press("Escape");

  // The review names the answer and offers to change it, apart.
  await page.getByRole("button", { name: /^no/ }).click();
  await page.getByTestId("review").waitFor();
  assert.equal(await page.getByTestId("answer").innerText(), "no");
  await page.getByRole("button", { name: "Change the answer to question 1" }).waitFor();
  await page.getByTestId("submit").click();
  assert.deepEqual((await plain.result()).json.answers, [{ id: "q", selected: ["no"] }]);
  // Back on the list, the address names no batch.
  await page.waitForFunction(() => location.hash === "#/inbox");
  headed.child.kill("SIGTERM");
});

test("a quorum batch: each approval is recorded and counted, and the last one closes it", async (t) => {
  const h = new Harness();
  t.after(() => h.close());
  const { url, mint } = await authServer(h);
  const agentToken = await mint("worker", "agent");
  const signedIn = (sub) => signInAs(h, url, mint, sub);
  const ana = await signedIn("ana@acme");
  const bo = await signedIn("bo@acme");
  const agent = h.ask(
    url,
    {
      sessionId: "deploys",
      questions: [question("go", "Deploy api to prod?", ["Approve", "Reject"], { header: "Deploy" })],
      quorum: { count: 2 },
    },
    ["--token", agentToken],
  );
  await listShows(ana, ["deploys"]);
  await approveFirst(ana);
  await shows(ana, "approved", "Your approval is recorded");
  await shows(ana, "approved", "needs 2 people");
  await screenshot(ana, "inbox-08-quorum-approved");
  assert.equal(agent.running(), true, "one approval of two: the agent still waits");

  await listShows(bo, ["deploys"]);
  await bo.getByTestId("batch").click();
  await shows(bo, "quorum", "1 so far: ana@acme");
  await bo.getByRole("button", { name: /^Approve/ }).click();
  await bo.getByTestId("review").waitFor();
  await bo.keyboard.press("Enter");
  const { code, json, stderr } = await agent.result();
  assert.equal(code, 0, stderr);
  assert.deepEqual(json.approvers, ["ana@acme", "bo@acme"], JSON.stringify(json));
  // Ana's vote was sent long ago: what she learns now is that the quorum is met.
  await shows(ana, "notice", "Approved by ana@acme, bo@acme: the quorum is met.");
  assert.doesNotMatch(await ana.getByTestId("notice").innerText(), /Answer sent/);
  await screenshot(ana, "inbox-09-quorum-met");
});

test("the address serve prints opens the inbox by itself on a server without authentication", async (t) => {
  const h = new Harness();
  t.after(() => h.close());
  const url = await h.serve();
  const page = await h.page();
  await page.goto(`${url}/console/`);
  await shows(page, "connection", "Connected");
  assert.equal(new URL(page.url()).hash, "#/inbox", "no sign-in form to get past");
  assert.equal(await page.getByTestId("sign-in-token").count(), 0);
  assert.equal(await page.getByTestId("sign-out").count(), 0, "no credential to sign out of");
  await screenshot(page, "inbox-10-anonymous-lands-in-the-inbox");

  // A server with authentication: the form, saying why it is there.
  const auth = new Harness();
  t.after(() => auth.close());
  const { url: authUrl } = await authServer(auth);
  const signIn = await auth.page();
  await signIn.goto(`${authUrl}/console/`);
  await shows(signIn, "sign-in-why", "it runs with --auth");
  assert.equal(new URL(signIn.url()).hash, "", "still the front door");
});

test("a batch for named approvers: it says who may answer, and refuses anyone else", async (t) => {
  const h = new Harness();
  t.after(() => h.close());
  const { url, mint } = await authServer(h);
  const agentToken = await mint("worker", "agent");
  const signedIn = (sub) => signInAs(h, url, mint, sub);
  const ana = await signedIn("ana@acme");
  const bo = await signedIn("bo@acme");
  const agent = h.ask(
    url,
    {
      sessionId: "deploys",
      questions: [question("go", "Deploy api to prod?", ["Approve", "Reject"], { header: "Deploy" })],
      approvers: { subjects: ["bo@acme"] },
      escalation: [{ afterMs: "3600000", approvers: { groups: ["sre"] } }],
    },
    ["--token", agentToken],
  );
  await listShows(ana, ["deploys"]);
  await ana.getByTestId("batch").click();
  await shows(ana, "approvers", "Only bo@acme may answer this.");
  await shows(ana, "escalation", "a member of sre may answer too");
  await screenshot(ana, "inbox-10-approvers");
  await ana.getByRole("button", { name: /^Approve/ }).click();
  await ana.getByTestId("review").waitFor();
  await ana.keyboard.press("Enter");
  await shows(ana, "hint", "only bo@acme may answer this");
  assert.equal(agent.running(), true, "a refused answer changes nothing");

  await listShows(bo, ["deploys"]);
  await approveFirst(bo);
  const { code, json, stderr } = await agent.result();
  assert.equal(code, 0, stderr);
  assert.equal(json.resolved_by, "bo@acme", JSON.stringify(json));
});
