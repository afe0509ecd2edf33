// Errors of askgate calls, routable by `reason` (the `google.rpc.ErrorInfo` reason the
// server attaches to every failure).

import { Code, ConnectError } from "@connectrpc/connect";

import { ErrorReason } from "./gen/askgate/v1/askgate_pb.js";
import { BadRequestSchema, ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";

/**
 * The machine-routable reason of a failure, by its wire name (`"NOT_PENDING"`): the
 * proto's `askgate.v1.ErrorReason`, so the server and every client share one list.
 * `"ERROR_REASON_UNSPECIFIED"` stands for no askgate reason (a transport failure, a
 * proxy, or a reason this client does not know yet); `code` still tells the gRPC code.
 */
export type Reason = keyof typeof ErrorReason;

/** Every reason, in the proto's order. */
export const REASONS: readonly Reason[] = Object.keys(ErrorReason).filter(
  (key) => Number.isNaN(Number(key)),
) as Reason[];

const ERROR_DOMAIN = "askgate";

function isReason(name: string): name is Reason {
  return (REASONS as readonly string[]).includes(name);
}

/** A field of an invalid request and what is wrong with it. */
export interface Violation {
  field: string;
  description: string;
}

/**
 * A failed askgate call: its `reason`, gRPC `code`, the message for humans and
 * models, the ErrorInfo `metadata` (`reason` of a cancel, `resolution` and
 * `resolved_by` of NOT_PENDING, ...) and the BadRequest field `violations`.
 */
export class AskgateError extends Error {
  override readonly name = "AskgateError";
  /**
   * The next step for a person (how to get a NO_PROVIDER session followed, what to
   * check when the server is unreachable), apart from `rawMessage`, which stays the
   * text agents and models know. Shown at the end of `message`.
   */
  readonly hint: string | undefined;

  constructor(
    readonly reason: Reason,
    readonly code: Code,
    readonly rawMessage: string,
    readonly metadata: Readonly<Record<string, string>> = {},
    readonly violations: readonly Violation[] = [],
    options?: { cause?: unknown; hint?: string },
  ) {
    const hint = options?.hint;
    const text = `${reason} (${Code[code]}): ${rawMessage}`;
    super(hint === undefined ? text : `${text} (hint: ${hint})`, options);
    this.hint = hint;
  }

  /**
   * This error with a hint for a person, when one helps: `addr` is the server's
   * address, `sessionId` the ask's.
   */
  withHint(addr: string | undefined, sessionId?: string): AskgateError {
    const hint = hintFor(this, addr, sessionId);
    if (hint === undefined || this.hint !== undefined) {
      return this;
    }
    return new AskgateError(this.reason, this.code, this.rawMessage, this.metadata, this.violations, {
      cause: this.cause,
      hint,
    });
  }

  /** The askgate error of whatever a call threw. */
  static from(thrown: unknown): AskgateError {
    if (thrown instanceof AskgateError) {
      return thrown;
    }
    const error = ConnectError.from(thrown);
    let reason: Reason = "ERROR_REASON_UNSPECIFIED";
    let metadata: Record<string, string> = {};
    for (const info of error.findDetails(ErrorInfoSchema)) {
      if (info.domain === ERROR_DOMAIN && isReason(info.reason)) {
        reason = info.reason;
        metadata = { ...info.metadata };
      }
    }
    const violations = error
      .findDetails(BadRequestSchema)
      .flatMap((bad) => bad.fieldViolations)
      .map(({ field, description }) => ({ field, description }));
    if (reason === "ERROR_REASON_UNSPECIFIED" && error.code === Code.Unauthenticated) {
      reason = "UNAUTHENTICATED";
    }
    if (reason === "ERROR_REASON_UNSPECIFIED" && error.code === Code.PermissionDenied) {
      reason = "PERMISSION_DENIED";
    }
    return new AskgateError(reason, error.code, error.rawMessage, metadata, violations, {
      cause: thrown,
    });
  }

  /** The ask's own deadline passed on this side. */
  static localDeadline(): AskgateError {
    return new AskgateError("ASK_EXPIRED", Code.DeadlineExceeded, "no answer before the deadline");
  }

  /**
   * Whether the same request may go again: the node is draining, the server is
   * unreachable, or the connection broke (no askgate reason at all; a stream the
   * broken connection took along ends CANCELED, which askgate itself never sends
   * without a reason). A call the caller aborted is told apart before this.
   */
  get retryable(): boolean {
    if (this.reason === "SHUTTING_DOWN" || this.reason === "BACKEND_UNAVAILABLE") {
      return true;
    }
    return (
      this.reason === "ERROR_REASON_UNSPECIFIED" &&
      [Code.Unavailable, Code.Unknown, Code.Internal, Code.Canceled].includes(this.code)
    );
  }
}

/** What a person does next after `error`, when this client can say. */
function hintFor(error: AskgateError, addr: string | undefined, sessionId?: string): string | undefined {
  if (error.reason === "NO_PROVIDER" && sessionId !== undefined && sessionId !== "") {
    const page = encodeURIComponent(sessionId).replaceAll("%2F", "/");
    const console =
      addr !== undefined && /^https?:\/\//.test(addr)
        ? ` (or open the console at ${addr.replace(/\/+$/, "")}/console/#/sessions/${page})`
        : "";
    return (
      `nobody follows session ${sessionId}: start \`askgate answer --session ${sessionId}\`` +
      `${console} first, or ask with hold: true to wait until someone does`
    );
  }
  if (error.reason === "ERROR_REASON_UNSPECIFIED" && error.code === Code.Unavailable) {
    const where = addr === undefined ? "" : ` at ${addr}`;
    return `cannot reach askgate${where}: is \`askgate serve\` running there?`;
  }
  return undefined;
}
