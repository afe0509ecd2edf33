// The askgate client over any Connect transport: asks, follows sessions, answers and
// cancels, holds an agent's lease, with retries and resume built in. Nothing here is
// Node's or the browser's: `client.ts` gives it Node's native gRPC transport, the
// console a gRPC-Web one (`@askgate/client/core`).

import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type CallOptions,
  type Client as RpcClient,
  Code,
  type Transport,
  createClient,
} from "@connectrpc/connect";

import { AskgateError } from "./errors.js";
import {
  Agents,
  type AttachResponse,
  type ConsumeReceiptResponse,
  type Delivery,
  DeliveryStatus,
  type Endpoint,
  type LinkCode,
  People,
  type Person,
  Policies,
  type PolicySet,
  type QuestionAnswer,
  Receipts,
  type Requested,
  Resolution,
  Slack,
  type SlackApp,
  SubscribeRequestSchema,
  type TestPoliciesResponse,
  UserQuestions,
  Webhooks,
  type WhoAmIResponse,
} from "./gen/askgate/v1/askgate_pb.js";
import {
  type Ask,
  type AskResult,
  DEFAULT_RETRY_BUDGET_MS,
  type Event,
  answerOf,
  askRequest,
  eventOf,
  freshRequestId,
  waitOf,
} from "./model.js";
import { Retries, backoff, pause } from "./retry.js";
import { traceHeaders } from "./trace.js";

/** Which session(s) to follow, and from where. */
export interface FollowOptions {
  sessionId?: string;
  /** Every session of the caller's tenant (instead of `sessionId`). */
  allSessions?: boolean;
  /** A cursor to resume after (an event's `cursor`). */
  after?: string;
  /** Be the session's only (exclusive) provider. */
  exclusive?: boolean;
  /** Ends the iteration. */
  signal?: AbortSignal;
  /**
   * Called when the stream failed and is about to be opened again (after a pause,
   * from the last cursor): what a UI shows while it reconnects. The next events are
   * the new stream's (a resumed one goes on; otherwise a fresh snapshot comes).
   */
  onRetry?: (error: AskgateError) => void;
}

/** Whether `signal` aborted the call that threw `thrown`. */
function abortedBy(signal: AbortSignal | undefined, thrown: unknown): boolean {
  return signal?.aborted === true && AskgateError.from(thrown).code === Code.Canceled;
}

/**
 * An askgate client over any Connect transport: the Node SDK's `Client` (native gRPC
 * over HTTP/2) is this one with Node's transport, the browser console uses it over
 * gRPC-Web. It may serve many calls at once; `close()` it when done.
 *
 * ```ts
 * const client = new Client(createGrpcWebTransport({ baseUrl: location.origin }), { token });
 * for await (const event of client.follow({ sessionId: "demo" })) { ... }
 * ```
 */
export class Client {
  readonly #token: string | undefined;
  readonly #channel: string | undefined;
  /** The server's address, when known: error hints name it. */
  readonly #addr: string | undefined;
  readonly #questions: RpcClient<typeof UserQuestions>;
  readonly #agents: RpcClient<typeof Agents>;
  readonly #webhooks: RpcClient<typeof Webhooks>;
  readonly #slack: RpcClient<typeof Slack>;
  readonly #receipts: RpcClient<typeof Receipts>;
  readonly #people: RpcClient<typeof People>;
  readonly #policies: RpcClient<typeof Policies>;
  /** Aborted by `close()`: calls in flight end, and nothing is retried after. */
  readonly #closed = new AbortController();

  /**
   * `channel`: the channel this client answers from (`askgate-channel`: "tui", the
   * application's name; not one of the server's own), recorded with what it resolves
   * and matched against an ask's `allowedChannels`.
   */
  constructor(transport: Transport, options: { token?: string; channel?: string; addr?: string } = {}) {
    this.#token = options.token;
    this.#channel = options.channel;
    this.#addr = options.addr;
    this.#questions = createClient(UserQuestions, transport);
    this.#agents = createClient(Agents, transport);
    this.#webhooks = createClient(Webhooks, transport);
    this.#slack = createClient(Slack, transport);
    this.#receipts = createClient(Receipts, transport);
    this.#people = createClient(People, transport);
    this.#policies = createClient(Policies, transport);
  }

  /** Ends the client: calls in flight fail (CANCELED), and none is retried. */
  close(): void {
    this.#closed.abort(new AskgateError("ERROR_REASON_UNSPECIFIED", Code.Canceled, "the client was closed"));
  }

  /** Aborts when `signal` does or the client is closed. */
  #until(signal: AbortSignal | undefined): AbortSignal {
    return signal === undefined ? this.#closed.signal : AbortSignal.any([signal, this.#closed.signal]);
  }

  /**
   * Asks and waits until the batch is resolved: the answers, or an
   * {@link AskgateError} (`ASK_CANCELLED` with the human's `metadata.reason`,
   * `ASK_EXPIRED`, `ASK_ABORTED`, a refusal).
   *
   * A call that fails with UNAVAILABLE (the node drains, the server is unreachable) or
   * a broken connection is retried with backoff and the same requestId, within the
   * timeout and the retry budget: the retry joins the pending ask, or gets the human's
   * answer if it came meanwhile.
   */
  async ask(ask: Ask): Promise<AskResult> {
    const wait = waitOf(ask);
    const retries = new Retries(wait, ask.retry ?? true, ask.retryForMs ?? DEFAULT_RETRY_BUDGET_MS);
    const request = askRequest(ask, ask.requestId ?? freshRequestId());
    const signal = this.#until(ask.signal);
    // The caller's trace context as the call starts: every attempt carries it.
    const trace = await traceHeaders(ask);
    for (;;) {
      const attempt = performance.now();
      let error: AskgateError;
      try {
        const timeoutMs = retries.timeoutMs();
        const options = this.#options({ signal, timeoutMs });
        options.headers = { ...(options.headers as Record<string, string>), ...trace };
        const response = await this.#questions.ask(request, options);
        return {
          rpcId: response.rpcId,
          answers: response.answers.map(answerOf),
          resolvedBy: response.resolvedBy,
          resolution: resolutionOf(response.resolution),
          approvers: [...response.approvers],
          receipt: response.receipt,
        };
      } catch (thrown) {
        if (abortedBy(signal, thrown)) {
          throw signal.reason;
        }
        error = AskgateError.from(thrown).withHint(this.#addr, request.sessionId);
        if (
          wait !== undefined &&
          error.code === Code.DeadlineExceeded &&
          error.reason === "ERROR_REASON_UNSPECIFIED"
        ) {
          throw AskgateError.localDeadline();
        }
      }
      await pause(retries.pauseAfter(attempt, error), signal);
    }
  }

  /** Answers a pending ask (one answer per question; see `select`, `custom`, `skip`). */
  async answer(sessionId: string, rpcId: string, answers: readonly QuestionAnswer[]): Promise<void> {
    await this.#call(() => this.#questions.answer({ sessionId, rpcId, answers: [...answers] }, this.#options()));
  }

  /** Closes a pending ask unanswered; the asker gets ASK_CANCELLED with `reason`. */
  async cancel(sessionId: string, rpcId: string, reason = ""): Promise<void> {
    await this.#call(() => this.#questions.cancel({ sessionId, rpcId, reason }, this.#options()));
  }

  /** The asker gives up its ask (by its requestId): resolved ABORTED at once. */
  async abort(sessionId: string, requestId: string): Promise<void> {
    await this.#call(() => this.#questions.abort({ sessionId, requestId }, this.#options()));
  }

  /** The session's pending asks, oldest first. */
  async listPending(sessionId: string): Promise<Requested[]> {
    const response = await this.#call(() => this.#questions.listPending({ sessionId }, this.#options()));
    return response.pending;
  }

  /**
   * Registers a webhook endpoint of the caller's tenant (admin credential). The
   * returned endpoint holds its signing secret (`whsec_…`), shown this once.
   * `events`: `ask.requested`, `ask.resolved`, `ask.reminder`, `ask.escalated` (none:
   * all); `labels`: only asks carrying all of them; `provides`: whether it counts as
   * following the sessions (default: when it gets `ask.requested`).
   */
  async createEndpoint(endpoint: {
    url: string;
    events?: readonly string[];
    description?: string;
    labels?: Readonly<Record<string, string>>;
    provides?: boolean;
  }): Promise<Endpoint> {
    const { url, events = [], description = "", labels = {}, provides } = endpoint;
    return await this.#call(() =>
      this.#webhooks.createEndpoint(
        { url, events: [...events], description, labels: { ...labels }, provides },
        this.#options(),
      ),
    );
  }

  /** The tenant's webhook endpoints, oldest first, without their secrets. */
  async listEndpoints(): Promise<Endpoint[]> {
    const response = await this.#call(() => this.#webhooks.listEndpoints({}, this.#options()));
    return response.endpoints;
  }

  /** Removes a webhook endpoint (NOT_FOUND when the tenant has none by that id). */
  async deleteEndpoint(id: string): Promise<void> {
    await this.#call(() => this.#webhooks.deleteEndpoint({ id }, this.#options()));
  }

  /** Webhook deliveries, newest first, of one endpoint and status if given. */
  async listDeliveries(
    filter: { endpointId?: string; status?: DeliveryStatus; limit?: number } = {},
  ): Promise<Delivery[]> {
    const { endpointId = "", status = DeliveryStatus.DELIVERY_STATUS_UNSPECIFIED, limit = 0 } = filter;
    const response = await this.#call(() =>
      this.#webhooks.listDeliveries({ endpointId, status, limit }, this.#options()),
    );
    return response.deliveries;
  }

  /** Sends a webhook delivery again, with the same `webhook-id`. */
  async redeliver(id: string): Promise<Delivery> {
    return await this.#call(() => this.#webhooks.redeliver({ id }, this.#options()));
  }

  /**
   * Who the client's credential names (tenant, subject, roles) and which sessions it
   * may see (`everySession`, or the `sessions` patterns); any role may ask.
   */
  /**
   * Uses up a receipt (agent or admin credential of its tenant): the first call
   * resolves to its `decision`, every later one rejects with `RECEIPT_CONSUMED`. An
   * executor that consumes before it runs the action runs it once, however often the
   * receipt is replayed. It checks neither the action nor the decision:
   * `verifyReceipt` (`@askgate/client/receipts`) does, and `checkReceipt` does both.
   */
  async consumeReceipt(receipt: string): Promise<ConsumeReceiptResponse> {
    return await this.#call(() => this.#receipts.consumeReceipt({ receipt: receipt.trim() }, this.#options()));
  }

  async whoAmI(): Promise<WhoAmIResponse> {
    return await this.#call(() => this.#questions.whoAmI({}, this.#options()));
  }

  /**
   * Connects a Slack app of the caller's tenant (admin credential): the tenant's
   * questions (of `sessionPrefix` and `labels`) are posted to `channel` and answered
   * there. The server checks `botToken` with Slack first; the secrets are never
   * returned.
   */
  async connectSlack(app: {
    botToken: string;
    signingSecret: string;
    channel: string;
    sessionPrefix?: string;
    labels?: Readonly<Record<string, string>>;
    description?: string;
    provides?: boolean;
  }): Promise<SlackApp> {
    const { botToken, signingSecret, channel, sessionPrefix = "", labels = {}, description = "", provides } = app;
    return await this.#call(() =>
      this.#slack.connectSlack(
        { botToken, signingSecret, channel, sessionPrefix, labels: { ...labels }, description, provides },
        this.#options(),
      ),
    );
  }

  /** The tenant's Slack apps, oldest first. */
  async listSlackApps(): Promise<SlackApp[]> {
    const response = await this.#call(() => this.#slack.listSlackApps({}, this.#options()));
    return response.apps;
  }

  /** Disconnects a Slack app (NOT_FOUND when the tenant has none by that id). */
  async disconnectSlack(id: string): Promise<void> {
    await this.#call(() => this.#slack.disconnectSlack({ id }, this.#options()));
  }

  /**
   * Puts a person of the caller's tenant (admin credential), replacing the whole
   * person: `identities` as `{ kind, value }` (`subject`, `slack` `TEAM/USER`,
   * `telegram`, `email`), each one person's at most; `delegate` answers for them
   * until `until` (docs/approvals.md "People").
   */
  async putPerson(person: {
    id: string;
    displayName?: string;
    groups?: readonly string[];
    identities?: readonly { kind: string; value: string }[];
    delegate?: { toPerson: string; until: Date };
  }): Promise<Person> {
    const { id, displayName = "", groups = [], identities = [], delegate } = person;
    const request = {
      id,
      displayName,
      groups: [...groups],
      identities: identities.map(({ kind, value }) => ({ kind, value })),
      delegate: delegate && { toPerson: delegate.toPerson, until: timestampFromDate(delegate.until) },
    };
    return await this.#call(() => this.#people.putPerson(request, this.#options()));
  }

  /**
   * Replaces the tenant's policy set (admin credential; docs/policy.md): Cedar
   * policies, validated against `schema` when there is one, in `mode` `"enforce"` or
   * `"shadow"` (decide and record, but always ask). BAD_REQUEST with Cedar's message
   * when they do not parse or fit: the stored set then stays as it was.
   */
  async putPolicies(text: string, options: { schema?: string; mode?: "enforce" | "shadow" } = {}): Promise<PolicySet> {
    const { schema = "", mode = "enforce" } = options;
    return await this.#call(() => this.#policies.putPolicies({ text, schema, mode }, this.#options()));
  }

  /** The tenant's policy set (`version` 0n when it has none). */
  async getPolicies(): Promise<PolicySet> {
    return await this.#call(() => this.#policies.getPolicies({}, this.#options()));
  }

  /**
   * What the tenant's policies (or a candidate `text` and `schema`) decide about `ask`,
   * asked by the caller (or `subject` with `groups`), without asking anyone or
   * recording anything: `decision` is allow, deny, ask, no_match or not_judged.
   */
  async testPolicies(
    ask: Ask,
    options: { subject?: string; groups?: readonly string[]; text?: string; schema?: string } = {},
  ): Promise<TestPoliciesResponse> {
    const { subject = "", groups = [], text = "", schema = "" } = options;
    const request = { ask: askRequest(ask, ask.requestId ?? freshRequestId()), subject, groups: [...groups], text, schema };
    return await this.#call(() => this.#policies.testPolicies(request, this.#options()));
  }

  /** The tenant's people (admin credential). */
  async listPeople(): Promise<Person[]> {
    const response = await this.#call(() => this.#people.listPeople({}, this.#options()));
    return response.people;
  }

  /** Removes a person (NOT_FOUND when the tenant has none by that id). */
  async deletePerson(id: string): Promise<void> {
    await this.#call(() => this.#people.deletePerson({ id }, this.#options()));
  }

  /**
   * A one-time code that links a channel identity to the caller's own person (any
   * role): `/link CODE` to one of the tenant's Telegram bots (in a private chat) or
   * Slack apps adds that account; good once, for 10 minutes. With `email`, the code is
   * mailed to that address inside a link instead (the returned code is empty), which
   * adds the address once confirmed on its page.
   */
  async startLink(options: { email?: string } = {}): Promise<LinkCode> {
    const { email = "" } = options;
    return await this.#call(() => this.#people.startLink({ email }, this.#options()));
  }

  /**
   * Follows a session (or all sessions): pending asks are replayed, then `synced`,
   * then live events. Across connection failures it reconnects with backoff and
   * resumes from the last cursor, so no event is missed or repeated while the server
   * holds the cursor (otherwise a `reset` and a fresh snapshot come). Ends when
   * `signal` aborts or the loop breaks; throws an {@link AskgateError} that is not
   * worth retrying (a refusal, a lost credential).
   */
  async *follow(options: FollowOptions): AsyncGenerator<Event, void, undefined> {
    const signal = this.#until(options.signal);
    let cursor = options.after ?? "";
    let delays = backoff();
    while (!signal?.aborted) {
      const request = create(SubscribeRequestSchema, {
        sessionId: options.sessionId ?? "",
        allSessions: options.allSessions ?? false,
        after: cursor,
        exclusive: options.exclusive ?? false,
      });
      try {
        for await (const message of this.#questions.subscribe(request, this.#options({ signal }))) {
          if (message.cursor) {
            cursor = message.cursor;
          }
          delays = backoff();
          const event = eventOf(message);
          if (event !== undefined) {
            yield event;
          }
        }
        return;
      } catch (thrown) {
        if (abortedBy(signal, thrown)) {
          return;
        }
        const error = AskgateError.from(thrown);
        if (!error.retryable) {
          throw error;
        }
        options.onRetry?.(error);
      }
      try {
        await pause(delays.next().value, signal);
      } catch {
        return;
      }
    }
  }

  /**
   * Attaches an agent: holds its lease until `close()` (or `await using`). Asks that
   * name `{agentId, incarnation: lease.incarnation}` are accepted while it is held;
   * when it ends they are ABORTED. Throws TOO_MANY_AGENTS, PERMISSION_DENIED, ...
   */
  async attach(agentId: string, parentAgentId = ""): Promise<AgentLease> {
    const stop = new AbortController();
    const stream = this.#agents.attach({ agentId, parentAgentId }, this.#options({ signal: this.#until(stop.signal) }));
    const messages = stream[Symbol.asyncIterator]();
    let first: IteratorResult<AttachResponse>;
    try {
      first = await messages.next();
    } catch (thrown) {
      stop.abort();
      throw AskgateError.from(thrown);
    }
    if (first.done || first.value.msg.case !== "lease") {
      stop.abort();
      throw new AskgateError("INTERNAL", Code.Internal, "Attach ended before its lease");
    }
    return new AgentLease(first.value.msg.value.incarnation, messages, stop);
  }

  #options({ signal, timeoutMs }: { signal?: AbortSignal; timeoutMs?: number } = {}): CallOptions {
    const headers: Record<string, string> = {};
    if (this.#token !== undefined) {
      headers.authorization = `Bearer ${this.#token}`;
    }
    if (this.#channel !== undefined) {
      headers["askgate-channel"] = this.#channel;
    }
    return { headers, signal: this.#until(signal), timeoutMs };
  }

  async #call<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (thrown) {
      throw AskgateError.from(thrown).withHint(this.#addr);
    }
  }
}

/** A held `Agents.Attach` stream, made by `Client.attach`. */
export class AgentLease {
  /** Settles when the lease ends: `undefined` when closed here, the error when the server ended it. */
  readonly ended: Promise<AskgateError | undefined>;

  /** @internal */
  constructor(
    readonly incarnation: string,
    messages: AsyncIterator<AttachResponse>,
    private readonly stop: AbortController,
  ) {
    this.ended = (async () => {
      try {
        while (!(await messages.next()).done) {
          // heartbeats
        }
        return undefined;
      } catch (thrown) {
        return stop.signal.aborted ? undefined : AskgateError.from(thrown);
      }
    })();
  }

  /** Detaches: the agent's pending asks are ABORTED. */
  async close(): Promise<void> {
    this.stop.abort();
    await this.ended;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

export { AskgateError, type Reason } from "./errors.js";
export type { Event } from "./model.js";

/** How a returned ask ended, as `AskResult.resolution` names it. */
function resolutionOf(resolution: Resolution): AskResult["resolution"] {
  switch (resolution) {
    case Resolution.DEFAULTED:
      return "DEFAULTED";
    case Resolution.ALLOWED_BY_POLICY:
      return "ALLOWED_BY_POLICY";
    default:
      return "ANSWERED";
  }
}
