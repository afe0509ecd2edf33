// The askgate client for Node: the transport-agnostic client of `core.ts` over native
// gRPC (HTTP/2), with its address and credentials from the options or the environment.

import { readFileSync } from "node:fs";

import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";

import { Client as CoreClient } from "./core.js";

export const DEFAULT_ADDR = "http://127.0.0.1:50051";

/** Where askgate is and how to reach it. */
export interface ClientOptions {
  /** `http://host:port`, or `https://…` for TLS. Default: `ASKGATE_ADDR`, then {@link DEFAULT_ADDR}. */
  addr?: string;
  /** A bearer token (API key or JWT). Default: `ASKGATE_TOKEN`, then the file at `ASKGATE_TOKEN_FILE`. */
  token?: string;
  /** For TLS: the CA (PEM) to trust instead of the system's. */
  ca?: string | Buffer;
  /** For mutual TLS: the client certificate chain and key (PEM). */
  cert?: string | Buffer;
  key?: string | Buffer;
  /**
   * The channel this client answers from (`askgate-channel`: "tui", the application's
   * name; not one of the server's own), matched against an ask's `allowedChannels`.
   */
  channel?: string;
}

function resolveToken(token: string | undefined): string | undefined {
  if (token !== undefined) {
    return token;
  }
  if (process.env.ASKGATE_TOKEN !== undefined) {
    return process.env.ASKGATE_TOKEN;
  }
  const file = process.env.ASKGATE_TOKEN_FILE;
  return file ? readFileSync(file, "utf8").trim() : undefined;
}

/**
 * An askgate client. One client holds one HTTP/2 connection (reconnected when it
 * breaks) and may serve many calls at once; `close()` it when done.
 *
 * ```ts
 * const client = new Client();          // ASKGATE_ADDR, ASKGATE_TOKEN
 * const result = await client.ask({ sessionId: "demo", questions: [question("db", "Which?", { options: ["A", "B"] })] });
 * ```
 */
export class Client extends CoreClient {
  readonly addr: string;
  readonly #hasToken: boolean;
  readonly #sessions: Http2SessionManager;

  constructor(options: ClientOptions = {}) {
    const addr = options.addr ?? process.env.ASKGATE_ADDR ?? DEFAULT_ADDR;
    const token = resolveToken(options.token);
    const { ca, cert, key } = options;
    const sessions = new Http2SessionManager(
      addr,
      { pingIntervalMs: 30_000, pingTimeoutMs: 15_000, idleConnectionTimeoutMs: 15 * 60_000 },
      { ca, cert, key },
    );
    super(createGrpcTransport({ baseUrl: addr, sessionManager: sessions }), {
      token,
      channel: options.channel,
      addr,
    });
    this.addr = addr;
    this.#hasToken = token !== undefined;
    this.#sessions = sessions;
  }

  /** Never the token. */
  override toString(): string {
    return `Client(${this.addr}${this.#hasToken ? ", token: <redacted>" : ""})`;
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }

  /** Closes the connection; calls in flight fail (CANCELED), and none is retried. */
  override close(): void {
    super.close();
    this.#sessions.abort();
  }
}

export { AgentLease, type FollowOptions } from "./core.js";
