// The console's view of one session, or (the inbox) of every session the credential
// may see: the SDK's follow (resumed from the last cursor after a drop), the queue of
// pending batches with their composers, what was resolved since the page opened, and
// the Answer and Cancel calls. Drawing is view.ts's and inbox.ts's.

import { AskgateError, Client, type Reason } from "@askgate/client/core";
import {
  type Approval,
  type Requested,
  type Resolved,
  type WhoAmIResponse,
  CancelSource,
  Resolution,
} from "@askgate/client/proto";
import { Code } from "@connectrpc/connect";
import { Composer } from "./composer.js";
import { transport } from "./signin.js";

export type Connection =
  | { kind: "connecting" }
  /** `resumed`: the stream went on from the last cursor (no fresh snapshot). */
  | { kind: "connected"; resumed: boolean }
  | { kind: "reconnecting"; why: string; attempt: number }
  /** The server refused the subscription for good (credentials, session id);
   * `unauthenticated`: for want of a credential it accepts. */
  | { kind: "refused"; why: string; unauthenticated: boolean };

/** A message for the human about a batch that left the queue. */
export interface Notice {
  text: string;
  /** The batch's first header or question, so the human knows which one. */
  about: string;
  tone: "info" | "done" | "warn";
}

/** A batch resolved since the page opened: the inbox's "recently resolved" list. */
export interface Recent {
  sessionId: string;
  rpcId: string;
  about: string;
  /** How, and by whom when known (resolutionNotice's words). */
  how: string;
  resolution: Resolution;
  resolvedBy: string;
  at: Date;
}

/** How many resolved batches the inbox remembers. */
const RECENT = 50;

export interface Options {
  /** Where askgate is: the page's own origin by default. */
  baseUrl: string;
  /** The session to follow; absent: every session the credential may see (the inbox). */
  sessionId?: string;
  /** A bearer token (an API key or a JWT), when the server requires one. */
  token?: string;
  /** The console session's CSRF token, on a server that signs in with an identity provider. */
  csrf?: string;
  /** The signed-in person's name (a console session's), shown in the header. */
  person?: string;
  /** The batch to open once it is listed (a deep link's `batch`). */
  opened?: string;
  /** Called after every change the view should show. */
  onChange: () => void;
  /** Called for a batch that arrives live (not in a snapshot): the inbox notifies. */
  onArrival?: (composer: Composer) => void;
}

/** How a batch was resolved, and by whom (the terminal overlay says the same). */
export function resolutionNotice(
  resolved: Pick<Resolved, "reason" | "resolvedBy" | "cancelReason"> & {
    cancelSource?: CancelSource;
    approvers?: readonly string[];
  },
  where = " elsewhere",
): string {
  const by = resolved.resolvedBy ? ` by ${resolved.resolvedBy}` : "";
  switch (resolved.reason) {
    case Resolution.ANSWERED:
      // A quorum met: every approver, not only the last.
      if (resolved.approvers !== undefined && resolved.approvers.length > 1) {
        return `Approved by ${resolved.approvers.join(", ")}: the quorum is met.`;
      }
      return `Answered${where}${by}.`;
    case Resolution.CANCELLED:
      if (resolved.cancelSource === CancelSource.APPROVERS_DISAGREED) {
        return `Not answered: ${resolved.cancelReason || "the approvers disagreed"}.`;
      }
      if (resolved.cancelSource === CancelSource.UI_CLOSED) {
        return resolved.resolvedBy
          ? `Closed unanswered: the exclusive answering window of ${resolved.resolvedBy} closed.`
          : "Closed unanswered: an exclusive answering window closed.";
      }
      return resolved.cancelReason ? `Cancelled${by}: ${resolved.cancelReason}` : `Cancelled${by}.`;
    case Resolution.ABORTED:
      return "Aborted: the asking agent went away.";
    case Resolution.EXPIRED:
      return "Expired: the agent stopped waiting.";
    case Resolution.DISPOSED:
      return "Disposed: the server shut down.";
    default:
      return "Resolved.";
  }
}

/** askgate's error reason of a failed call (the SDK reads it from the error's details). */
export function errorReason(error: unknown): Reason {
  return AskgateError.from(error).reason;
}

/**
 * What a NOT_PENDING error's metadata says about the resolution that won, while the
 * server remembers the ask; undefined when it does not say.
 */
export function settledBy(error: unknown): { reason: Resolution; resolvedBy: string } | undefined {
  const { metadata } = AskgateError.from(error);
  const reason = Resolution[metadata.resolution as keyof typeof Resolution];
  if (reason === undefined) return undefined;
  return { reason, resolvedBy: metadata.resolved_by ?? "" };
}

/** A failure in words for a person: the server's message, without protocol names. */
function describe(error: unknown): string {
  return AskgateError.from(error).rawMessage || "the connection failed";
}

/** Errors a retry cannot mend: the subscription stops and says why. */
const FINAL = new Set([Code.Unauthenticated, Code.PermissionDenied, Code.InvalidArgument]);

/** The longest pause between two reconnection attempts. */
const MAX_BACKOFF_MS = 5000;

export class Session {
  readonly options: Options;
  connection: Connection = { kind: "connecting" };
  /** Pending batches, oldest first; for one session, the first one is in the composer. */
  queue: Composer[] = [];
  /** The latest notice, until the next one. */
  notice: Notice | undefined;
  /** Batches resolved since the page opened, newest first. */
  recent: Recent[] = [];
  /** The inbox's batch in the composer (its rpc_id); none: the list shows. */
  opened: string | undefined;
  /** Whose credential this is, once WhoAmI has answered. */
  whoami: WhoAmIResponse | undefined;
  /** The snapshot is over: later `requested` events are arrivals. */
  private live = false;
  private readonly client: Client;
  /** Drafts of batches dropped by a reset, in case the snapshot brings them back. */
  private kept = new Map<string, Composer>();
  /** Batches seen in the current snapshot (before `synced`). */
  private seen = new Set<string>();
  private cursor = "";
  private stopped = new AbortController();

  constructor(options: Options) {
    this.options = options;
    this.opened = options.opened;
    this.client = new Client(transport(options.baseUrl, options.csrf), { token: options.token });
  }

  /** Whether this tab holds a credential (a token, or a console session) for the server. */
  get signedIn(): boolean {
    return this.options.token !== undefined || this.options.csrf !== undefined;
  }

  /** Following every session the credential may see, not one. */
  get inbox(): boolean {
    return this.options.sessionId === undefined;
  }

  /** The batch in the composer. */
  get current(): Composer | undefined {
    const opened = this.queue.find((c) => c.batch.rpcId === this.opened);
    return this.inbox ? opened : (opened ?? this.queue[0]);
  }

  /** Puts a batch of the inbox in the composer, or (undefined) goes back to the list. */
  open(rpcId: string | undefined): void {
    this.opened = rpcId;
    this.options.onChange();
  }

  /** Asks the server whose credential this is (shown by the inbox). */
  async identify(): Promise<void> {
    try {
      this.whoami = await this.client.whoAmI();
      this.options.onChange();
    } catch {
      // The subscription reports a refused credential; WhoAmI only adds detail.
    }
  }

  /**
   * Follows the session until `stop`, reconnecting after every drop: the SDK's follow
   * resumes from the last cursor after a connection failure (saying so through
   * `onRetry`); a stream the server ended, or a refusal a retry may mend (a cap), is
   * followed again from here after a pause. A refused credential or session ends it.
   */
  async run(): Promise<void> {
    let attempt = 0;
    const reconnecting = (why: string): void => {
      this.connection = { kind: "reconnecting", why, attempt };
      attempt += 1;
      // The next stream (the first one starts so) begins with its snapshot, then live
      // events.
      this.seen.clear();
      this.live = false;
      this.options.onChange();
    };
    while (!this.stopped.signal.aborted) {
      try {
        const events = this.client.follow({
          ...(this.inbox ? { allSessions: true } : { sessionId: this.options.sessionId }),
          after: this.cursor,
          signal: this.stopped.signal,
          onRetry: (error) => reconnecting(describe(error)),
        });
        for await (const event of events) {
          if (event.cursor) this.cursor = event.cursor;
          switch (event.kind) {
            case "requested":
              this.requested(event.requested);
              break;
            case "resolved":
              this.resolved(event.resolved);
              break;
            case "approval":
              this.approval(event.approval);
              break;
            case "synced":
              this.synced(event.resumed);
              attempt = 0;
              break;
            case "reset":
              this.reset();
              break;
          }
          this.options.onChange();
        }
        if (this.stopped.signal.aborted) return;
        reconnecting("the server ended the stream");
      } catch (error) {
        if (this.stopped.signal.aborted) return;
        const failure = AskgateError.from(error);
        if (FINAL.has(failure.code)) {
          this.connection = {
            kind: "refused",
            why: describe(failure),
            unauthenticated: failure.code === Code.Unauthenticated,
          };
          this.options.onChange();
          return;
        }
        reconnecting(describe(failure));
      }
      await this.pause(Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.min(attempt, 5)));
    }
  }

  stop(): void {
    this.stopped.abort();
    this.client.close();
  }

  /** Sends the composer's batch with Answer; the composer waits for `resolved`. */
  async submit(composer: Composer): Promise<void> {
    if (!composer.complete()) return;
    await this.send(composer, "answer", (batch) =>
      this.client.answer(batch.sessionId, batch.rpcId, composer.answers()),
    );
  }

  /** Closes the whole batch with Cancel and the human's reason (possibly empty). */
  async cancel(composer: Composer, reason: string): Promise<void> {
    await this.send(composer, "cancel", (batch) =>
      this.client.cancel(batch.sessionId, batch.rpcId, reason.trim()),
    );
  }

  dismissNotice(): void {
    this.notice = undefined;
    this.options.onChange();
  }

  /** Sends the batch once; the composer then waits for the batch's `resolved` event. */
  private async send(
    composer: Composer,
    what: "answer" | "cancel",
    call: (batch: { sessionId: string; rpcId: string }) => Promise<unknown>,
  ): Promise<void> {
    if (composer.phase.kind === "sent") return;
    composer.sent(what);
    this.options.onChange();
    try {
      await call({ sessionId: composer.batch.sessionId, rpcId: composer.batch.rpcId });
      // A quorum batch stays pending for its other approvers (unless this approval
      // completed it and its `resolved` came first).
      if (what === "answer" && composer.quorum() > 0 && this.queue.includes(composer)) {
        composer.approved();
        this.options.onChange();
      }
    } catch (error) {
      if (errorReason(error) === "ALREADY_APPROVED") {
        composer.approved();
        this.options.onChange();
        return;
      }
      // Too late: another resolution won. Its metadata says which (then the batch
      // closes now); else its `resolved` event closes the batch with a notice saying
      // how and by whom, so the composer keeps waiting for it.
      if (errorReason(error) === "NOT_PENDING") {
        const settled = settledBy(error);
        if (settled) {
          this.close(composer, { ...settled, cancelReason: "" }, false);
          this.options.onChange();
        }
        return;
      }
      composer.unsent(`Not sent: ${describe(error)}`);
      this.options.onChange();
    }
  }

  private requested(batch: Requested): void {
    this.seen.add(batch.rpcId);
    if (this.queue.some((c) => c.batch.rpcId === batch.rpcId)) return;
    // A batch seen before a reset or a reconnect comes back with its drafts.
    const known = this.kept.get(batch.rpcId);
    const composer = known ?? new Composer(batch);
    this.kept.delete(batch.rpcId);
    this.queue.push(composer);
    if (this.live && !known) this.options.onArrival?.(composer);
  }

  /** A recorded approval of a quorum batch: its count so far. */
  private approval(approval: Approval): void {
    const composer = this.queue.find((c) => c.batch.rpcId === approval.rpcId);
    if (!composer) return;
    const by = [...(composer.approvals?.by ?? []), approval.subject];
    composer.approvals = { count: approval.count, needed: approval.needed, by };
  }

  private resolved(resolved: Resolved): void {
    this.kept.delete(resolved.rpcId);
    const composer = this.queue.find((c) => c.batch.rpcId === resolved.rpcId);
    if (composer) this.close(composer, resolved, true);
  }

  /**
   * Takes a resolved batch out of the queue, with a notice saying how (ours, or
   * elsewhere and by whom), and remembers it among the recently resolved.
   */
  private close(
    composer: Composer,
    resolved: Pick<Resolved, "reason" | "resolvedBy" | "cancelReason"> & {
      cancelSource?: CancelSource;
      approvers?: readonly string[];
    },
    event: boolean,
  ): void {
    this.queue = this.queue.filter((c) => c !== composer);
    if (this.opened === composer.batch.rpcId) this.opened = undefined;
    const about = title(composer);
    const sent =
      composer.phase.kind === "sent" ? composer.phase.what : composer.phase.kind === "approved" ? "answer" : undefined;
    const ours =
      event &&
      ((sent === "answer" && resolved.reason === Resolution.ANSWERED) ||
        (sent === "cancel" && resolved.reason === Resolution.CANCELLED));
    // A quorum this console approved in is met by someone else's answer: the notice
    // says so, not "Answer sent" (this answer was a vote, sent long ago).
    const quorumMet = resolved.approvers !== undefined && resolved.approvers.length > 1;
    this.notice = ours
      ? { text: sent === "cancel" ? "Cancelled." : quorumMet ? resolutionNotice(resolved) : "Answer sent.", about, tone: "done" }
      : { text: resolutionNotice(resolved), about, tone: "warn" };
    this.recent.unshift({
      sessionId: composer.batch.sessionId,
      rpcId: composer.batch.rpcId,
      about,
      how: resolutionNotice(resolved, ""),
      resolution: resolved.reason,
      resolvedBy: resolved.resolvedBy,
      at: new Date(),
    });
    this.recent.length = Math.min(this.recent.length, RECENT);
  }

  private synced(resumed: boolean): void {
    this.live = true;
    this.connection = { kind: "connected", resumed };
    if (resumed) return;
    // A fresh snapshot lists every pending batch: the others were resolved while the
    // stream was down.
    const gone = this.queue.filter((c) => !this.seen.has(c.batch.rpcId));
    this.queue = this.queue.filter((c) => this.seen.has(c.batch.rpcId));
    if (this.opened && !this.queue.some((c) => c.batch.rpcId === this.opened)) {
      this.opened = undefined;
    }
    if (gone.length > 0 && !this.notice) {
      this.notice = {
        text: "Resolved while the console was disconnected.",
        about: gone.map(title).join(", "),
        tone: "info",
      };
    }
    this.kept.clear();
  }

  /** Drop what this scope holds (keeping the drafts): a fresh snapshot follows. */
  private reset(): void {
    for (const composer of this.queue) this.kept.set(composer.batch.rpcId, composer);
    this.queue = [];
    this.seen.clear();
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.stopped.signal.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          resolve();
        },
        { once: true },
      );
    });
  }
}

/** A batch's name for notices and the queue: its first header, else its first question. */
export function title(composer: Composer): string {
  const first = composer.batch.questions[0];
  return first?.header || first?.question || composer.batch.rpcId;
}
