// Slack from the outside: `askgate slack connect` (the admin call the docs show) against
// a real askgate posting to a fake Slack Web API, a plan review answered with a signed
// click, and the message before and after, drawn from the Block Kit askgate sent (the
// docs' screenshots).

import assert from "node:assert/strict";
import { test } from "node:test";
import { Harness, question, screenshot, tempFile } from "./harness.mjs";
import { FakeSlack, control, interact, preview } from "./slack-preview.mjs";

const TOKEN = "xoxb-console-test";
const SIGNING_SECRET = "console-test-signing-secret";

test("a plan review posted to Slack, approved with a click, and updated in place", async (t) => {
  const h = new Harness();
  t.after(() => h.close());
  const slack = await FakeSlack.start(TOKEN);
  t.after(() => slack.close());
  const url = await h.serve(["--slack-api-url", slack.url]);
  const app = JSON.parse(
    await h.run([
      "slack", "connect", "--addr", url,
      "--bot-token-file", tempFile("bot-token", TOKEN),
      "--signing-secret-file", tempFile("signing-secret", SIGNING_SECRET),
      "--channel", "C0QUESTIONS", "--description", "on-call",
    ]),
  );
  assert.equal(app.team_id, "T1");
  assert.equal(JSON.stringify(app).includes(TOKEN), false, "no secret is printed");
  const listed = JSON.parse(await h.run(["slack", "list", "--addr", url]));
  assert.deepEqual(listed.apps.map((a) => a.id), [app.id]);

  const agent = h.ask(url, {
    sessionId: "deploy/web",
    labels: { team: "platform" },
    questions: [
      question(
        "plan",
        "Proceed with this rollout plan?",
        [
          { label: "Approve", description: "Run the plan as written" },
          { label: "Revise", description: "Send it back with notes" },
        ],
        {
          header: "Rollout",
          detail: "1. Drain eu-west-1\n2. Deploy web 2.14 to half the fleet\n3. Watch errors for 15 minutes\n4. Deploy the rest",
          intent: { planReview: { approve: "Approve" } },
        },
      ),
    ],
  });
  const posted = await slack.next("chat.postMessage");
  assert.equal(posted.authorized, true);
  const page = await h.page({ width: 720, height: 240 });
  await page.setContent(preview(posted.body.blocks));
  await screenshot(page, "slack-01-question");

  const approve = control(posted.body.blocks, "askgate.choose", "Approve");
  const status = await interact(url, SIGNING_SECRET, {
    type: "block_actions",
    team: { id: "T1" },
    user: { id: "U024BE7LH" },
    message: { blocks: posted.body.blocks },
    actions: [{ action_id: approve.action_id, value: approve.value }],
  });
  assert.equal(status, 200);
  const { code, json, stderr } = await agent.result();
  assert.equal(code, 0, stderr);
  assert.deepEqual(json.answers, [{ id: "plan", selected: ["Approve"] }]);
  assert.equal(json.resolved_by, "slack:T1/U024BE7LH");

  const updated = await slack.next("chat.update", (c) => c.body.ts === posted.reply.ts);
  assert.equal(updated.body.blocks.some((b) => b.type === "actions"), false, "no buttons left");
  await page.setContent(preview(updated.body.blocks));
  await screenshot(page, "slack-02-answered");

  // A forged click (another secret) is refused.
  assert.equal(await interact(url, "not-the-secret", { type: "block_actions", actions: [{ value: approve }] }), 401);
  await h.run(["slack", "disconnect", "--addr", url, app.id]);
});
