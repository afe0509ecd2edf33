// Email's links followed in a real browser: a real askgate mails a real SMTP server
// (aiosmtpd's, tests/email/smtp_sink.py), and headless Chromium opens the mail's link,
// sees the ask with the link's option chosen, and sends the form; the asking agent
// gets the answer, as the person the mail went to.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { Harness, question, screenshot, tempFile, within } from "./harness.mjs";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/** The SMTP server; `mails()` yields each mail it took. */
async function smtpSink(t) {
  const python = process.env.ASKGATE_TEST_PYTHON ?? path.join(repo, "target/test-venv/bin/python");
  const child = spawn(python, [path.join(repo, "tests/email/smtp_sink.py")], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  t.after(() => child.kill("SIGKILL"));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const port = Number((await within("the SMTP server's port", lines.next())).value);
  return {
    port,
    next: async () => JSON.parse((await within("a mail", lines.next())).value),
  };
}

/** A free port on 127.0.0.1: the server's public URL must be known before it starts. */
async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test("a person opens the mail's link in a browser and sends the form; the agent gets the answer", async (t) => {
  const h = new Harness();
  t.after(() => h.close());
  const smtp = await smtpSink(t);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const key = tempFile("secret.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
  const server = h.spawn([
    "serve", "--listen", `127.0.0.1:${port}`, "--public-url", url, "--secret-key-file", key,
    "--smtp-url", `smtp://127.0.0.1:${smtp.port}`, "--email-from", "askgate <askgate@example.com>",
  ]);
  let log = "";
  await within("askgate serve to listen", new Promise((resolve, reject) => {
    server.stderr.on("data", (chunk) => {
      log += chunk;
      if (/local_addr=/.test(log)) resolve();
    });
    server.on("exit", (code) => reject(new Error(`askgate serve exited ${code}:\n${log}`)));
  }));
  await h.run(["email", "connect", "--addr", url, "--to", "ana@example.com"]);

  const agent = h.ask(url, {
    sessionId: "deploy/1",
    questions: [question("q", "Deploy <b>now</b>?", ["yes", "no"])],
  });
  const mail = await smtp.next();
  assert.equal(mail.rcpt_tos[0], "ana@example.com");
  const links = mail.text.split("\n").map((l) => l.trim()).filter((l) => l.startsWith("choose: "));
  assert.equal(links.length, 2, mail.text);
  const no = links[1].slice("choose: ".length);

  const page = await h.page();
  await page.goto(no);
  // The page shows the ask as written (escaped), with the link's option chosen;
  // opening it answered nothing.
  await page.getByText("Deploy <b>now</b>?").waitFor();
  assert.equal(await page.getByRole("radio", { name: "no" }).isChecked(), true);
  assert.equal(agent.running(), true);
  // Whom the person answers as, on the console's look (its colours, its cards).
  await page.getByText("you answer as email:ana@example.com").waitFor();
  const card = await page.locator(".card").evaluate((el) => getComputedStyle(el).borderRadius);
  assert.equal(card, "10px", "the console's card");
  await screenshot(page, "email-link-page");
  await page.getByRole("button", { name: "Send" }).click();
  await page.getByText("Your answer is sent:").waitFor();
  await page.getByText("Deploy <b>now</b>? → no").waitFor();
  await page.getByText("Sent as email:ana@example.com.").waitFor();
  await screenshot(page, "email-link-sent");

  const { code, json } = await agent.result();
  assert.equal(code, 0);
  assert.deepEqual(json.answers, [{ id: "q", selected: ["no"] }]);
  assert.equal(json.resolved_by, "email:ana@example.com");

  // The link is spent: opening it again says so.
  const again = await page.goto(no);
  assert.equal(again.status(), 410);

  // The other option's link, opened later on a phone: who won, and what.
  const phone = await h.page({ width: 390, height: 844 });
  const late = await phone.goto(links[0].slice("choose: ".length));
  assert.equal(late.status(), 409);
  await phone.getByText("Too late: answered by email:ana@example.com.").waitFor();
  await phone.getByText("Deploy <b>now</b>? → no").waitFor();
  const overflow = await phone.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
  assert.equal(overflow, false, "no sideways scrolling at phone width");
  await screenshot(phone, "email-link-late-phone");
});
