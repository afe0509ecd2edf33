// The console end to end: a real askgate, real asking processes, headless Chromium.
// Each test asserts what the asking agent received (its exit code and output), not
// only what the page shows, and saves a screenshot of each state it passes through.

import assert from "node:assert/strict";
import { test } from "node:test";
import { CuttableProxy, Harness, question, screenshot, tempFile } from "./harness.mjs";

/** A started server, a page on its console for `session`, and cleanup. */
async function setUp(t, { session, serveArgs = [], viewport, token } = {}) {
  const h = new Harness();
  t.after(() => h.close());
  const url = await h.serve(serveArgs);
  const page = await h.page(viewport);
  const hash = `#/sessions/${session}${token ? `?token=${encodeURIComponent(token)}` : ""}`;
  await page.goto(`${url}/console/${hash}`);
  await page.getByTestId("connection").filter({ hasText: "Connected" }).waitFor();
  return { h, url, page };
}

/** Waits until the element `testId` shows `text`. */
function shows(page, testId, text) {
  return page.getByTestId(testId).filter({ hasText: text }).waitFor();
}

test("single-select: choosing advances at once; Enter on the review submits", async (t) => {
  const { h, url, page } = await setUp(t, { session: "single" });
  const agent = h.ask(url, {
    sessionId: "single",
    questions: [
      question(
        "db",
        "Which database should the service use?",
        [
          { label: "Postgres (Recommended)", description: "Durable, and the team knows it" },
          { label: "SQLite", description: "One file, no server" },
        ],
        { header: "Database" },
      ),
      question("env", "Deploy where first?", ["staging", "prod"], { header: "Target" }),
    ],
  });
  await shows(page, "progress", "1 of 2");
  assert.equal(await page.getByTestId("recommended").count(), 1, "the Recommended badge shows");
  assert.equal(
    await page.locator('[aria-pressed="true"]').count(),
    0,
    "nothing is preselected, not even the recommended option",
  );
  await screenshot(page, "01-single-select");

  await page.getByRole("button", { name: /SQLite/ }).click();
  await shows(page, "progress", "2 of 2");
  // Keyboard alone: the focused option, then Down and Enter.
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("Enter");
  await page.getByTestId("review").waitFor();
  await screenshot(page, "02-review");
  await page.keyboard.press("Enter");

  const { code, json, stderr } = await agent.result();
  assert.equal(code, 0, stderr);
  assert.deepEqual(
    json.answers,
    [
      { id: "db", selected: ["SQLite"] },
      { id: "env", selected: ["prod"] },
    ],
    JSON.stringify(json),
  );
  await shows(page, "notice", "Answer sent");
  await page.getByTestId("idle").waitFor();
});

test("multi-select toggles and Other adds; Other replaces a single choice", async (t) => {
  const { h, url, page } = await setUp(t, { session: "multi" });
  const agent = h.ask(url, {
    sessionId: "multi",
    questions: [
      question("checks", "Which checks should run before merging?", ["lint", "unit tests", "benchmarks"], {
        header: "Checks",
        multiSelect: true,
      }),
      question("name", "What should the release be called?", ["1.0", "1.0-rc1"], { header: "Release" }),
    ],
  });
  await shows(page, "progress", "1 of 2");
  await page.getByRole("checkbox", { name: /lint/ }).check();
  await page.getByRole("checkbox", { name: /benchmarks/ }).check();
  await page.getByRole("checkbox", { name: /unit tests/ }).check();
  await page.getByRole("checkbox", { name: /unit tests/ }).uncheck();
  await page.getByTestId("text").fill("fuzzing");
  await screenshot(page, "03-multi-select-with-other");
  await page.getByTestId("text").press("Enter");
  await shows(page, "progress", "2 of 2");

  await page.getByRole("button", { name: /1\.0-rc1/ }).click();
  await page.getByTestId("review").waitFor();
  // Back to the single-select: own words replace the choice made there.
  await page.getByRole("button", { name: "Change the answer to question 2" }).click();
  await shows(page, "progress", "2 of 2");
  await page.getByTestId("text").fill("2.0 Beta");
  await page.getByTestId("text").press("Enter");
  await page.getByTestId("review").waitFor();
  await page.getByTestId("submit").click();

  const { code, json, stderr } = await agent.result();
  assert.equal(code, 0, stderr);
  assert.deepEqual(
    json.answers,
    [
      { id: "checks", selected: ["lint", "benchmarks"], custom: "fuzzing" },
      { id: "name", custom: "2.0 Beta" },
    ],
    JSON.stringify(json),
  );
});

test("an optionless question takes text; Skip skips one item and keeps the drafts", async (t) => {
  const { h, url, page } = await setUp(t, { session: "skip" });
  const agent = h.ask(url, {
    sessionId: "skip",
    questions: [
      question("go", "Proceed with the migration?", ["yes", "no"], { header: "Proceed" }),
      question("notes", "Anything the agent should know?", [], { header: "Notes" }),
      question("color", "Which colour for the banner?", ["red", "blue"], { header: "Banner" }),
    ],
  });
  await page.getByRole("button", { name: /^yes/ }).click();
  await shows(page, "progress", "2 of 3");
  // The optionless question shows its text box, focused.
  const text = page.getByTestId("text");
  assert.equal(await text.evaluate((el) => el.tagName), "TEXTAREA");
  await page.keyboard.type("back up the database first");
  await page.keyboard.press("Enter");
  await shows(page, "progress", "3 of 3");
  await screenshot(page, "04-before-skip");
  await page.getByTestId("skip").click();
  await page.getByTestId("review").waitFor();

  // The earlier drafts are still there.
  await page.getByRole("button", { name: "Change the answer to question 1" }).click();
  await shows(page, "progress", "1 of 3");
  assert.equal(await page.getByRole("button", { name: /^yes/ }).getAttribute("aria-pressed"), "true");
  await page.getByRole("button", { name: /Notes/ }).click();
  assert.equal(await page.getByTestId("text").inputValue(), "back up the database first");
  await page.getByRole("button", { name: /Banner/ }).click();
  await page.getByTestId("skip").click();
  await page.getByTestId("review").waitFor();
  await page.keyboard.press("Enter");

  const { code, json, stderr } = await agent.result();
  assert.equal(code, 0, stderr);
  assert.deepEqual(
    json.answers,
    [
      { id: "go", selected: ["yes"] },
      { id: "notes", custom: "back up the database first" },
      { id: "color" },
    ],
    JSON.stringify(json),
  );
});

test("Enter during an IME composition only confirms the candidate, never submits", async (t) => {
  const { h, url, page } = await setUp(t, { session: "ime" });
  const agent = h.ask(url, {
    sessionId: "ime",
    questions: [question("name", "What should the greeting say?", [], { header: "Greeting" })],
  });
  const text = page.getByTestId("text");
  await text.waitFor();
  await page.keyboard.type("hello");
  await page.keyboard.press("Enter");
  await page.getByTestId("review").waitFor();
  // Complete already: from here, an Enter that counted would submit the batch.
  await page.getByRole("button", { name: /^Change the answer/ }).click();
  await text.waitFor();
  await text.fill("");
  await text.focus();

  // What a browser dispatches while an input method composes 日本 and Enter picks it.
  const handled = await text.evaluate((el) => {
    const enter = (init) =>
      el.dispatchEvent(
        new KeyboardEvent("keydown", { key: "Enter", code: "Enter", bubbles: true, cancelable: true, ...init }),
      );
    el.dispatchEvent(new CompositionEvent("compositionstart", { bubbles: true, data: "" }));
    el.value = "にほん";
    el.dispatchEvent(new InputEvent("input", { bubbles: true, isComposing: true, data: "にほん" }));
    const first = enter({ isComposing: true, keyCode: 229 });
    el.value = "日本";
    el.dispatchEvent(new InputEvent("input", { bubbles: true, isComposing: true, data: "日本" }));
    const second = enter({ isComposing: true, keyCode: 13 });
    el.dispatchEvent(new CompositionEvent("compositionend", { bubbles: true, data: "日本" }));
    // Some browsers send the confirming Enter after compositionend, as keyCode 229.
    const third = enter({ isComposing: false, keyCode: 229 });
    return [first, second, third];
  });
  assert.deepEqual(handled, [true, true, true], "no composing Enter was taken (preventDefault) by the console");
  assert.equal(await page.getByTestId("review").count(), 0, "still on the question, not the review");
  assert.equal(await text.inputValue(), "日本");
  assert.ok(agent.running(), "nothing was sent");
  await screenshot(page, "05-ime-composition");

  // A plain Enter confirms; another submits.
  await page.keyboard.press("Enter");
  await page.getByTestId("review").waitFor();
  await page.keyboard.press("Enter");
  const { code, json, stderr } = await agent.result();
  assert.equal(code, 0, stderr);
  assert.deepEqual(json.answers, [{ id: "name", custom: "日本" }], JSON.stringify(json));
});

test("close cancels the whole batch with the reason: the agent gets ASK_CANCELLED", async (t) => {
  const { h, url, page } = await setUp(t, { session: "close" });
  const agent = h.ask(url, {
    sessionId: "close",
    questions: [
      question(
        "plan",
        "Approve this migration plan?",
        ["Approve", "Revise"],
        {
          header: "Plan",
          detail: "1. Add the column\n2. Backfill in batches of 1,000\n3. Switch reads",
          intent: { planReview: { approve: "Approve" } },
        },
      ),
      question("when", "When should it run?", ["now", "tonight"]),
    ],
  });
  await page.getByText("The plan to review").waitFor();
  await page.getByText("Approves the plan").waitFor();
  await screenshot(page, "06-plan-review");
  await page.getByRole("button", { name: /Approve/ }).first().click();
  // Esc leaves the close dialog for the question the human was on.
  await page.getByTestId("close").click();
  await page.getByTestId("reason").waitFor();
  await page.keyboard.press("Escape");
  await shows(page, "progress", "2 of 2");
  assert.ok(agent.running(), "nothing was sent");
  await page.getByTestId("close").click();
  await page.getByTestId("reason").fill("use the staging database first");
  await screenshot(page, "07-close-with-reason");
  await page.getByTestId("reason").press("Enter");

  const { code, stderr } = await agent.result();
  assert.equal(code, 3, `ASK_CANCELLED exits 3: ${stderr}`);
  assert.match(stderr, /ASK_CANCELLED/);
  assert.match(stderr, /use the staging database first/, "the reason reaches the agent");
  await shows(page, "notice", "Cancelled");
  await page.getByTestId("idle").waitFor();
});

test("a bot answering first closes the batch with a notice saying by whom", async (t) => {
  const { h, url, page } = await setUp(t, { session: "race" });
  const agent = h.ask(url, {
    sessionId: "race",
    questions: [
      question("deploy", "Deploy now?", ["yes", "no"], { header: "Deploy" }),
      question("notify", "Tell the team?", ["yes", "no"], { header: "Notify" }),
    ],
  });
  await page.getByTestId("composer").waitFor();
  // The human is half-way through (and chose otherwise) when a bot answers.
  await page.getByRole("button", { name: /^no/ }).click();
  await shows(page, "progress", "2 of 2");
  // `askgate bot` answers every pending batch of the session with its first options.
  h.spawn(["bot", "--addr", url, "--session", "race", "--policy", "first"]);
  await shows(page, "notice", "Answered elsewhere by");
  await page.getByTestId("idle").waitFor();
  await screenshot(page, "08-answered-elsewhere");

  const { code, json, stderr } = await agent.result();
  assert.equal(code, 0, stderr);
  assert.deepEqual(json.answers, [
    { id: "deploy", selected: ["yes"] },
    { id: "notify", selected: ["yes"] },
  ]);
});

test("several batches queue visibly, oldest first; at phone width", async (t) => {
  const { h, url, page } = await setUp(t, { session: "queue", viewport: { width: 390, height: 844 } });
  const first = h.ask(url, {
    sessionId: "queue",
    questions: [question("a", "First question?", ["one", "two"], { header: "First" })],
  });
  await page.getByTestId("composer").filter({ hasText: "First question?" }).waitFor();
  const second = h.ask(url, {
    sessionId: "queue",
    questions: [question("b", "Second question?", ["three", "four"], { header: "Second" })],
  });
  await shows(page, "queue", "1 more waiting");
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `no sideways scrolling at phone width (content is ${width}px wide)`);
  await screenshot(page, "09-queue-phone");

  await page.getByRole("button", { name: /two/ }).click();
  await page.keyboard.press("Enter");
  await page.getByTestId("composer").filter({ hasText: "Second question?" }).waitFor();
  assert.equal(await page.getByTestId("queue").count(), 0);
  await page.getByRole("button", { name: /three/ }).click();
  await page.keyboard.press("Enter");

  assert.deepEqual((await first.result()).json.answers, [{ id: "a", selected: ["two"] }]);
  assert.deepEqual((await second.result()).json.answers, [{ id: "b", selected: ["three"] }]);
});

test("a per-session token in the URL authenticates, and leaves the address bar", async (t) => {
  const secret = tempFile("jwt.secret", "console-test-secret-at-least-32-bytes-long!");
  const serveArgs = ["--auth", "jwt", "--jwt-secret-file", secret];
  const mint = (roles, sessions, sub) =>
    h.run(["token", "--secret-file", secret, "--tenant", "acme", "--sub", sub, "--roles", roles, "--sessions", sessions]);
  const h = new Harness();
  t.after(() => h.close());
  const url = await h.serve(serveArgs);
  const human = (await mint("ui", "tok", "alice@example.com")).trim();
  const agentToken = (await mint("agent", "tok", "worker")).trim();

  const page = await h.page();
  await page.goto(`${url}/console/#/sessions/tok?token=${encodeURIComponent(human)}`);
  await page.getByTestId("connection").filter({ hasText: "Connected" }).waitFor();
  assert.equal(new URL(page.url()).hash, "#/sessions/tok", "the token is taken out of the URL");

  const agent = h.ask(url, {
    sessionId: "tok",
    questions: [question("ok", "Ship it?", ["yes", "no"])],
  }, ["--token", agentToken]);
  await page.getByRole("button", { name: /^yes/ }).click();
  await page.keyboard.press("Enter");
  const { code, json, stderr } = await agent.result();
  assert.equal(code, 0, stderr);
  assert.equal(json.resolved_by, "alice@example.com", JSON.stringify(json));
  // The page takes the batch's `resolved` (and puts its address bar right) before it
  // is sent elsewhere: a history update racing the navigation would cancel it.
  await shows(page, "notice", "Answer sent");

  // The same token does not open another session.
  await page.goto(`${url}/console/#/sessions/other`);
  await page.reload();
  await shows(page, "connection", "Refused");
});

test("after a dropped connection the console resumes and keeps the drafts", async (t) => {
  const h = new Harness();
  t.after(() => h.close());
  const url = await h.serve();
  const proxy = await CuttableProxy.start(url);
  t.after(() => proxy.close());
  const page = await h.page();
  await page.goto(`${proxy.url}/console/#/sessions/drop`);
  await shows(page, "connection", "Connected");
  const first = h.ask(url, {
    sessionId: "drop",
    questions: [
      question("region", "Which region?", ["eu-west", "us-east"], { header: "Region" }),
      question("size", "Which size?", ["small", "large"], { header: "Size" }),
    ],
  });
  await page.getByRole("button", { name: /us-east/ }).click();
  await shows(page, "progress", "2 of 2");

  proxy.cut();
  await shows(page, "connection", "Reconnecting");
  // Asked while the console is away: the resumed stream brings it.
  const second = h.ask(url, {
    sessionId: "drop",
    questions: [question("later", "Asked during the outage?", ["yes", "no"])],
  });
  await screenshot(page, "10-reconnecting");
  proxy.release();
  await shows(page, "connection", "Connected");
  assert.equal(
    await page.getByTestId("connection").getAttribute("data-resumed"),
    "true",
    "the stream resumed from the console's last cursor",
  );
  await shows(page, "queue", "1 more waiting");
  await shows(page, "progress", "2 of 2");
  await page.getByRole("button", { name: /Region/ }).click();
  assert.equal(
    await page.getByRole("button", { name: /us-east/ }).getAttribute("aria-pressed"),
    "true",
    "the draft made before the drop is still there",
  );
  await page.getByRole("button", { name: /Size/ }).click();
  await page.getByRole("button", { name: /large/ }).click();
  await page.keyboard.press("Enter");
  await page.getByTestId("composer").filter({ hasText: "Asked during the outage?" }).waitFor();
  await page.getByRole("button", { name: /^no/ }).click();
  await page.keyboard.press("Enter");

  assert.deepEqual((await first.result()).json.answers, [
    { id: "region", selected: ["us-east"] },
    { id: "size", selected: ["large"] },
  ]);
  assert.deepEqual((await second.result()).json.answers, [{ id: "later", selected: ["no"] }]);
});

test("what an answer approves shows with the question; only the console may answer it", async (t) => {
  const { h, url, page } = await setUp(t, { session: "approve" });
  const agent = h.ask(url, {
    sessionId: "approve",
    questions: [question("go", "Deploy api to prod?", ["Approve", "Reject"], { header: "Deploy" })],
    action: { name: "deploy", argumentsJson: JSON.stringify({ service: "api", env: "prod", replicas: 3 }) },
    allowedChannels: ["console"],
    ttlMs: 600_000,
    defaultAnswers: [{ id: "go", selected: ["Reject"] }],
  });
  await shows(page, "action-name", "deploy");
  await shows(page, "action-arguments", '"replicas": 3');
  // Who asked, what the digest means, and when the default applies.
  await shows(page, "action-digest", "Asked by anonymous.");
  await shows(page, "action-digest", "the signed receipt binds your answer to exactly this action");
  await shows(page, "defaults", "Reject.");
  // The ttl was 10 min when asked; a slow machine may show a minute less.
  assert.match(await page.getByTestId("defaults").innerText(), /^If nobody answers by .+ \(in (9|10) min\): Reject\.$/);
  await screenshot(page, "11-approval-with-action");
  await page.getByRole("button", { name: /Approve/ }).first().click();
  await page.getByTestId("review").waitFor();
  await page.keyboard.press("Enter");
  const { code, json, stderr } = await agent.result();
  assert.equal(code, 0, `the console is an allowed channel: ${stderr}`);
  assert.deepEqual(json.answers, [{ id: "go", selected: ["Approve"] }], JSON.stringify(json));
});

test("a secret is typed masked and shown hidden; only the asking agent gets it", async (t) => {
  const { h, url, page } = await setUp(t, { session: "secret" });
  const secret = "zq7731-typed-secret";
  const agent = h.ask(url, {
    sessionId: "secret",
    questions: [
      question("code", "The one-time code from your token?", [], { header: "Code", secret: true }),
      question("go", "Rotate the key?", ["yes", "no"], { header: "Rotate" }),
    ],
  });
  const text = page.getByTestId("text");
  await text.waitFor();
  assert.equal(await text.getAttribute("type"), "password", "a secret is typed masked");
  assert.equal(await text.getAttribute("autocomplete"), "off");
  assert.match(await page.locator("label.text-label").innerText(), /only the asking agent gets it/);
  await page.keyboard.type(secret);
  await page.keyboard.press("Enter");
  await shows(page, "progress", "2 of 2");
  await page.getByRole("button", { name: /^yes/ }).click();
  await page.getByTestId("review").waitFor();
  await screenshot(page, "12-secret-hidden-on-review");
  assert.equal(await page.getByTestId("answer").first().innerText(), "(hidden)");
  assert.ok(!(await page.content()).includes(secret), "the page shows the secret nowhere");
  await page.keyboard.press("Enter");
  const { code, json, stderr } = await agent.result();
  assert.equal(code, 0, stderr);
  assert.deepEqual(
    json.answers,
    [
      { id: "code", custom: secret },
      { id: "go", selected: ["yes"] },
    ],
    JSON.stringify(json),
  );
});
