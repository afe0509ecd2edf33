// What the SDK's tests share: a real `askgate serve` (the binary at ASKGATE_BIN), a
// TCP proxy that can cut connections, and bounded waits. Every process and socket a
// test starts is stopped by the test's cleanup.

import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { Client, question } from "@askgate/client";

export const ASKGATE =
  process.env.ASKGATE_BIN ?? fileURLToPath(new URL("../../../target/debug/askgate", import.meta.url));

/** How long any wait of a test may last before it fails. */
export const WAIT_MS = 20_000;

/** Rejects with `what` when `promise` has not settled within WAIT_MS. */
export async function within(what, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), WAIT_MS);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Calls `check` until it returns something truthy, within WAIT_MS. */
export async function eventually(what, check) {
  const deadline = performance.now() + WAIT_MS;
  for (;;) {
    const result = await check();
    if (result) {
      return result;
    }
    if (performance.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A directory for a test's files, removed by `remove()`. */
export function tempDir() {
  const path = mkdtempSync(join(tmpdir(), "askgate-node-"));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** Runs the askgate binary to completion; its stdout. */
export async function askgateOutput(args) {
  const child = spawn(ASKGATE, args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (chunk) => (out += chunk));
  child.stderr.on("data", (chunk) => (err += chunk));
  const [code] = await within(`askgate ${args[0]}`, once(child, "exit"));
  if (code !== 0) {
    throw new Error(`askgate ${args.join(" ")} exited ${code}: ${err}`);
  }
  return out;
}

/** `askgate serve` on an ephemeral port; `addr` once started. */
export class Server {
  static async start(args = []) {
    // Tests choose their engine: memory unless `args` say otherwise.
    const child = spawn(ASKGATE, ["serve", "--listen", "127.0.0.1:0", "--log", "info", ...args], {
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, ASKGATE_BACKEND: "memory" },
    });
    const addr = await within(
      "askgate serve to listen",
      new Promise((resolve, reject) => {
        let log = "";
        child.stderr.setEncoding("utf8");
        child.stderr.on("data", (chunk) => {
          log += chunk;
          const found = /local_addr=([0-9.:]+)/.exec(log);
          if (found) {
            resolve(`http://${found[1]}`);
          }
        });
        child.once("exit", (code) => reject(new Error(`askgate serve exited ${code}: ${log}`)));
      }),
    );
    // Keep draining its log so that it never blocks on a full pipe.
    child.stderr.removeAllListeners("data");
    child.stderr.resume();
    return new Server(child, addr);
  }

  constructor(child, addr) {
    this.child = child;
    this.addr = addr;
  }

  async stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = once(this.child, "exit");
      this.child.kill("SIGKILL");
      await exited;
    }
  }
}

/** A background `askgate` process (a bot, say), killed by `stop()`. */
export function askgateProcess(args) {
  const child = spawn(ASKGATE, args, { stdio: "ignore" });
  return {
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, "exit");
        child.kill("SIGKILL");
        await exited;
      }
    },
  };
}

/**
 * Forwards 127.0.0.1:<port> to `upstream` (`http://host:port`). `cut()` drops every
 * connection and refuses new ones until `restore()`: a network failure with the
 * server still up.
 */
export class Proxy {
  static async start(upstream) {
    const target = new URL(upstream);
    const proxy = new Proxy(target);
    proxy.server.listen(0, "127.0.0.1");
    await once(proxy.server, "listening");
    proxy.addr = `http://127.0.0.1:${proxy.server.address().port}`;
    return proxy;
  }

  constructor(target) {
    this.sockets = new Set();
    this.cutOff = false;
    this.server = net.createServer((inbound) => {
      if (this.cutOff) {
        inbound.destroy();
        return;
      }
      const outbound = net.connect(Number(target.port), target.hostname);
      for (const socket of [inbound, outbound]) {
        this.sockets.add(socket);
        socket.on("close", () => this.sockets.delete(socket));
        socket.on("error", () => {
          inbound.destroy();
          outbound.destroy();
        });
      }
      inbound.pipe(outbound).pipe(inbound);
    });
  }

  cut() {
    this.cutOff = true;
    for (const socket of this.sockets) {
      socket.destroy();
    }
  }

  restore() {
    this.cutOff = false;
  }

  async close() {
    this.cut();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/**
 * `askgate bot` answering `sessionId` (first option) on `server`, once it follows the
 * session: a probe ask fails NO_PROVIDER until then. `stop()` it.
 */
export async function startBot(server, sessionId) {
  const bot = askgateProcess(["bot", "--addr", server.addr, "--session", sessionId, "--policy", "first"]);
  const client = new Client({ addr: server.addr });
  const probe = { sessionId, questions: [question("probe", "Ready?", { options: ["yes"] })], timeoutMs: 5_000 };
  try {
    await eventually("the bot to follow the session", () =>
      client.ask(probe).then(
        () => true,
        (error) => {
          if (error.reason === "NO_PROVIDER") {
            return false;
          }
          throw error;
        },
      ),
    );
  } catch (error) {
    await bot.stop();
    throw error;
  } finally {
    client.close();
  }
  return bot;
}
