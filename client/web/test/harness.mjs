// What the console tests run against: a real `askgate serve` on an ephemeral port,
// real `askgate ask` processes as the agents (their exit codes and output are what
// the tests assert), and Debian's Chromium driven by playwright-core. Every process
// and browser a test starts is ended when the test ends.

import { spawn } from "node:child_process";
import net from "node:net";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../../..");

/** The askgate binary under test: ASKGATE_BIN, else the workspace's debug build. */
export const ASKGATE = process.env.ASKGATE_BIN ?? path.join(repo, "target/debug/askgate");

/** Where each state's screenshot goes (CI keeps this folder as an artifact). */
export const SCREENSHOTS =
  process.env.ASKGATE_SCREENSHOTS ?? path.join(repo, "target/console-screenshots");

/** How long any one wait may take before the test fails saying what it waited for. */
const WAIT_MS = 15_000;

/** Rejects with `what` if `promise` takes longer than WAIT_MS. */
export function within(what, promise, ms = WAIT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Everything one test started, ended by `close` in the test's `after`. */
export class Harness {
  constructor() {
    this.children = [];
    /** What the pages threw uncaught: any fails the test when it closes. */
    this.pageErrors = [];
    this.browser = undefined;
  }

  /**
   * `askgate serve` on `listen` (an ephemeral port of 127.0.0.1 unless given) with
   * `args`; resolves with its http:// URL.
   */
  async serve(args = [], { listen = "127.0.0.1:0" } = {}) {
    const child = this.spawn(["serve", "--listen", listen, ...args]);
    let log = "";
    const url = await within(
      "askgate serve to listen",
      new Promise((resolve, reject) => {
        child.stderr.on("data", (chunk) => {
          log += chunk;
          const match = /local_addr=([0-9.:]+)/.exec(log);
          if (match) resolve(`http://${match[1]}`);
        });
        child.on("exit", (code) => reject(new Error(`askgate serve exited ${code}:\n${log}`)));
      }),
    );
    return url;
  }

  /**
   * An agent: `askgate ask` holding `request` (an AskRequest as JSON) until it is
   * resolved. `result` settles with its exit code, parsed stdout and stderr.
   */
  ask(url, request, extra = []) {
    const child = this.spawn(["ask", "--addr", url, "--hold", "--json", "-", ...extra]);
    child.stdin.end(JSON.stringify(request));
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
    return {
      child,
      /** The agent's outcome: { code, json, stderr }. */
      result: () =>
        within(
          "the asking process to finish",
          exited.then((code) => ({ code, json: parse(stdout), stderr })),
        ),
      /** Whether it is still waiting for the human. */
      running: () => child.exitCode === null && child.signalCode === null,
    };
  }

  /** Runs an askgate client command to its end; resolves with its stdout, rejects if it fails. */
  async run(args) {
    const child = this.spawn(args);
    let output = "";
    let errors = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (errors += chunk));
    const code = await within(`askgate ${args[0]}`, new Promise((resolve) => child.on("exit", resolve)));
    if (code !== 0) throw new Error(`askgate ${args.join(" ")} exited ${code}:\n${output}${errors}`);
    return output;
  }

  /** A headless Chromium page (Debian's, at CHROMIUM or /usr/bin/chromium). */
  async page({ width = 900, height = 760 } = {}) {
    if (!this.browser) {
      this.browser = await chromium.launch({
        executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
        // The machine's network is closed: no background fetches to Google's hosts.
        args: [
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
        ],
      });
    }
    const context = await this.browser.newContext({ viewport: { width, height } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    page.on("pageerror", (error) => {
      console.error(`page error: ${error.message}`);
      this.pageErrors.push(error.message);
    });
    return page;
  }

  async close() {
    await this.browser?.close().catch(() => {});
    for (const child of this.children) {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
    if (this.pageErrors.length > 0) {
      throw new Error(`the console threw uncaught: ${this.pageErrors.join("; ")}`);
    }
  }

  spawn(args) {
    const child = spawn(ASKGATE, args, {
      stdio: ["pipe", "pipe", "pipe"],
      // Tests choose their engine: memory unless `args` say otherwise.
      env: { ...process.env, NO_COLOR: "1", ASKGATE_LOG: "info", ASKGATE_BACKEND: "memory" },
    });
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    this.children.push(child);
    return child;
  }
}

/**
 * A TCP proxy in front of `url` whose connections can be cut, so that the page loses
 * its stream as it would on a network drop. While held, new connections are refused.
 */
export class CuttableProxy {
  static async start(url) {
    const target = new URL(url);
    const proxy = new CuttableProxy();
    proxy.server = net.createServer((client) => {
      if (proxy.held) {
        client.destroy();
        return;
      }
      const upstream = net.connect(Number(target.port), target.hostname);
      for (const [from, to] of [[client, upstream], [upstream, client]]) {
        from.pipe(to);
        from.on("error", () => to.destroy());
        from.on("close", () => to.destroy());
      }
      proxy.sockets.add(client);
      client.on("close", () => proxy.sockets.delete(client));
    });
    await new Promise((resolve) => proxy.server.listen(0, "127.0.0.1", resolve));
    proxy.url = `http://127.0.0.1:${proxy.server.address().port}`;
    return proxy;
  }

  constructor() {
    this.sockets = new Set();
    this.held = false;
  }

  /** Drops every open connection and refuses new ones until `release`. */
  cut() {
    this.held = true;
    for (const socket of this.sockets) socket.destroy();
  }

  release() {
    this.held = false;
  }

  close() {
    this.cut();
    this.server.close();
  }
}

function parse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Saves the page as `<name>.png` in SCREENSHOTS. */
export async function screenshot(page, name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** A file in a fresh temporary folder (keys, secrets). */
export function tempFile(name, contents) {
  const dir = mkdtempSync(path.join(tmpdir(), "askgate-console-"));
  const file = path.join(dir, name);
  // Owner only, as askgate expects of a file holding a secret.
  writeFileSync(file, contents, { mode: 0o600 });
  return file;
}

/** A question for an AskRequest. */
export function question(id, text, options = [], extra = {}) {
  return {
    id,
    question: text,
    options: options.map((o) => (typeof o === "string" ? { label: o } : o)),
    ...extra,
  };
}
