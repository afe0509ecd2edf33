// Receipts: what an executor checks before it runs an action a human approved
// (docs/approvals.md).
//
//   import { checkReceipt } from "@askgate/client/receipts";
//
//   const jwks = await (await fetch("http://127.0.0.1:50051/.well-known/jwks.json")).json();
//   const claims = await checkReceipt(client, result.receipt, jwks, deploy, { tenant: "acme" });
//   run(deploy); // approved for acme, this very action, and used up: a replay is refused
//
// A receipt is a compact JWS (EdDSA, Ed25519) whose claims bind a decision to the
// tenant and to the digest of the action the human saw: SHA-256 over the RFC 8785
// canonical JSON of `{"name", "arguments"}`, the same in every askgate client. One key
// may sign every tenant's receipts: the tenant check is what keeps another tenant's
// approval from running this one's action.

import { createHash } from "node:crypto";

import canonicalizeModule from "canonicalize";
import { type JSONWebKeySet, createLocalJWKSet, decodeProtectedHeader, errors, jwtVerify } from "jose";

import type { ConsumeReceiptResponse, QuestionAnswer } from "./gen/askgate/v1/askgate_pb.js";
import { type Action, answersJson } from "./model.js";

export { type AnswerEntry, answersJson } from "./model.js";

export const ISSUER = "askgate";
/** How far this machine's clock may be behind the server's, in seconds. */
export const DEFAULT_LEEWAY_S = 60;
/** The `typ` of a signed audit head (never a receipt). */
export const AUDIT_HEAD_TYPE = "askgate-audit-head+jwt";
/** The largest integer a double holds with every smaller one: 2^53 - 1. */
export const MAX_SAFE_INTEGER = Number.MAX_SAFE_INTEGER;

/** What a receipt states. */
export interface ReceiptClaims {
  iss: string;
  tenant: string;
  session_id: string;
  rpc_id: string;
  action_digest: string;
  /** `ANSWERED`, `DEFAULTED`, `CANCELLED`, `EXPIRED`, ... */
  resolution: string;
  /** `approved` (only then may the action run), `rejected`, `defaulted`, `cancelled`, `expired`, `aborted`. */
  decision: string;
  /** The subject of the credential that asked (an approver equal to it approved its own request). */
  asked_by: string;
  answers_digest: string;
  approvers: string[];
  resolved_by: string;
  iat: number;
  exp: number;
  /** The rpc_id: one decision, one jti. */
  jti: string;
}

/** Why a receipt must not be acted on. */
export type ReceiptErrorKind =
  | "malformed"
  | "unknown_key"
  | "bad_signature"
  | "expired"
  | "wrong_tenant"
  | "wrong_action"
  | "inexact"
  | "not_approved";

/**
 * A receipt that must not be acted on: `kind` "malformed", "unknown_key" (signed by a
 * key the set does not hold), "bad_signature" (changed or forged), "expired",
 * "wrong_tenant" (another tenant's receipt), "wrong_action" (a receipt for another
 * action than the one about to run), "inexact" (the action's arguments hold a number a
 * double would change: it has no exact digest) or "not_approved" (a valid receipt whose
 * decision is rejected, defaulted, cancelled, expired or aborted; `claims` holds it).
 */
export class ReceiptError extends Error {
  constructor(
    readonly kind: ReceiptErrorKind,
    message: string,
    readonly claims?: ReceiptClaims,
  ) {
    super(`${kind}: ${message}`);
    this.name = "ReceiptError";
  }
}

/** A decimal number as [negative, significant digits, exponent of the last digit]. */
function decimal(text: string): [boolean, string, number] {
  let negative = false;
  let rest = text;
  if (rest.startsWith("-")) {
    negative = true;
    rest = rest.slice(1);
  }
  const e = rest.search(/[eE]/);
  let exponent = e >= 0 ? Number.parseInt(rest.slice(e + 1), 10) : 0;
  const mantissa = e >= 0 ? rest.slice(0, e) : rest;
  const [whole, fraction = ""] = mantissa.split(".");
  const digits = `${whole}${fraction}`;
  exponent -= fraction.length;
  const trimmedEnd = digits.replace(/0+$/, "");
  exponent += digits.length - trimmedEnd.length;
  const significant = trimmedEnd.replace(/^0+/, "");
  return significant === "" ? [false, "", 0] : [negative, significant, exponent];
}

/** Why the JSON number `text` is not I-JSON, if it is not. */
function inexact(text: string): string | undefined {
  if (!/[.eE]/.test(text)) {
    const magnitude = BigInt(text.replace(/^-/, ""));
    return magnitude > BigInt(MAX_SAFE_INTEGER) ? "an integer beyond ±(2^53 - 1)" : undefined;
  }
  const value = Number(text);
  if (!Number.isFinite(value)) {
    return "beyond the range of a double";
  }
  const [a, b] = [decimal(text), decimal(value.toExponential())];
  return a[0] === b[0] && a[1] === b[1] && a[2] === b[2] ? undefined : "not exactly a double";
}

/** The first number of `json` (a valid JSON text) that is not I-JSON (RFC 7493). */
export function firstInexactNumber(json: string): [string, string] | undefined {
  let i = 0;
  while (i < json.length) {
    const c = json[i];
    if (c === '"') {
      i += 1;
      while (i < json.length && json[i] !== '"') {
        i += json[i] === "\\" ? 2 : 1;
      }
      i += 1;
    } else if (c === "-" || (c >= "0" && c <= "9")) {
      const start = i;
      while (i < json.length && /[0-9+\-.eE]/.test(json[i])) {
        i += 1;
      }
      const number = json.slice(start, i);
      const why = inexact(number);
      if (why !== undefined) {
        return [number, why];
      }
    } else {
      i += 1;
    }
  }
  return undefined;
}

// The package is CommonJS (`module.exports = serialize`), which its typings describe as
// an ES default export: under NodeNext the default import is the function itself.
const canonicalize = canonicalizeModule as unknown as (input: unknown) => string | undefined;

/**
 * RFC 8785 canonical JSON of `value` (keys in UTF-16 order, no spaces, numbers as
 * ECMAScript prints them): what every digest is taken over, the same text in every
 * askgate SDK (tests/contract/vectors.json).
 */
export function canonicalJson(value: unknown): string {
  return canonicalize(value) ?? "";
}

function digest(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value), "utf8").digest("hex");
}

/**
 * Lowercase hex SHA-256 of the canonical JSON of `{"name", "arguments"}`. The arguments
 * must be I-JSON (RFC 7493): every number exact in a double.
 */
export function actionDigest(action: Action): string {
  let args: unknown;
  try {
    args = JSON.parse(action.argumentsJson);
  } catch (thrown) {
    throw new ReceiptError("malformed", `argumentsJson is not JSON: ${String(thrown)}`);
  }
  const found = firstInexactNumber(action.argumentsJson);
  if (found !== undefined) {
    throw new ReceiptError("inexact", `argumentsJson holds ${found[0].slice(0, 64)}, ${found[1]}: send it as a string`);
  }
  return digest({ name: action.name, arguments: args });
}

/** The digest of answers as the tool returns them; a secret question's entry is `{"id", "secret": true}`. */
export function answersDigest(
  answers: readonly QuestionAnswer[],
  isSecret: (id: string) => boolean = () => false,
): string {
  return digest(answersJson(answers, isSecret));
}

/** How {@link verifyReceipt} checks. */
export interface VerifyOptions {
  /** The tenant the action runs for: a receipt of any other tenant is refused. */
  tenant: string;
  /** How far this machine's clock may be behind the server's ({@link DEFAULT_LEEWAY_S}). */
  leewayS?: number;
  /** Resolve to the claims whatever the decision (to record a "no"), instead of rejecting. */
  anyDecision?: boolean;
}

/**
 * Checks `token` before `action` runs for `tenant`: signed (EdDSA) by a key of `jwks`
 * (the server's `/.well-known/jwks.json`), issued by askgate, not expired, of this
 * tenant, bound to this very action, and deciding `approved`. Resolves to its claims
 * (with `decision` and `asked_by`); rejects with {@link ReceiptError} otherwise
 * (`not_approved` holds the claims of a valid receipt of another decision, which
 * `anyDecision` resolves to instead).
 */
export async function verifyReceipt(
  token: string,
  jwks: JSONWebKeySet,
  action: Action,
  { tenant, leewayS = DEFAULT_LEEWAY_S, anyDecision = false }: VerifyOptions,
): Promise<ReceiptClaims> {
  const expected = actionDigest(action);
  let alg: string | undefined;
  let typ: string | undefined;
  try {
    ({ alg, typ } = decodeProtectedHeader(token));
  } catch (thrown) {
    throw new ReceiptError("malformed", String(thrown));
  }
  if (alg !== "EdDSA") {
    throw new ReceiptError("malformed", `signed with ${alg}, not EdDSA`);
  }
  if (typ === AUDIT_HEAD_TYPE) {
    throw new ReceiptError("malformed", "an audit head, not a receipt");
  }
  let claims: ReceiptClaims;
  try {
    const verified = await jwtVerify(token, createLocalJWKSet(jwks), {
      issuer: ISSUER,
      algorithms: ["EdDSA"],
      clockTolerance: leewayS,
      requiredClaims: ["exp", "iss"],
    });
    claims = verified.payload as unknown as ReceiptClaims;
  } catch (thrown) {
    if (thrown instanceof errors.JWTExpired) {
      throw new ReceiptError("expired", "the receipt has expired");
    }
    if (thrown instanceof errors.JWKSNoMatchingKey) {
      throw new ReceiptError("unknown_key", "signed with a key the key set does not hold");
    }
    if (thrown instanceof errors.JWSSignatureVerificationFailed) {
      throw new ReceiptError("bad_signature", "the receipt's signature does not verify");
    }
    throw new ReceiptError("malformed", String(thrown));
  }
  if (claims.tenant !== tenant) {
    throw new ReceiptError("wrong_tenant", `the receipt is of tenant ${JSON.stringify(claims.tenant)}, not ${JSON.stringify(tenant)}`);
  }
  if (claims.action_digest !== expected) {
    throw new ReceiptError(
      "wrong_action",
      `the receipt is for another action (digest ${claims.action_digest}, this action's ${expected})`,
    );
  }
  if (!anyDecision && claims.decision !== "approved") {
    throw new ReceiptError("not_approved", `the receipt's decision is ${claims.decision || "not stated"}, not approved`, claims);
  }
  return claims;
}

/** What {@link checkReceipt} consumes a receipt with: an askgate `Client`. */
export interface ReceiptConsumer {
  consumeReceipt(receipt: string): Promise<ConsumeReceiptResponse>;
}

/**
 * The executor's whole check before it runs `action`: {@link verifyReceipt} (this
 * tenant, this action, approved), then the receipt consumed on the server, so that a
 * replay of it runs nothing twice (`RECEIPT_CONSUMED`, an `AskgateError`). Resolves to
 * the claims.
 */
export async function checkReceipt(
  client: ReceiptConsumer,
  token: string,
  jwks: JSONWebKeySet,
  action: Action,
  options: VerifyOptions,
): Promise<ReceiptClaims> {
  const claims = await verifyReceipt(token, jwks, action, { ...options, anyDecision: false });
  await client.consumeReceipt(token);
  return claims;
}
