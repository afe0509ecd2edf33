// Receipts: what an executor checks before it runs an action a human approved
// (docs/approvals.md).
//
//   import { verifyReceipt } from "@askgate/client/receipts";
//
//   const jwks = await (await fetch("http://127.0.0.1:50051/.well-known/jwks.json")).json();
//   const claims = await verifyReceipt(result.receipt, jwks, action("deploy", { env: "prod" }));
//
// A receipt is a compact JWS (EdDSA, Ed25519) whose claims bind a resolution to the
// digest of the action the human saw: SHA-256 over the RFC 8785 canonical JSON of
// `{"name", "arguments"}`, the same in every askgate client.

import { createHash } from "node:crypto";

import canonicalizeModule from "canonicalize";
import { type JSONWebKeySet, createLocalJWKSet, decodeProtectedHeader, errors, jwtVerify } from "jose";

import type { QuestionAnswer } from "./gen/askgate/v1/askgate_pb.js";
import type { Action } from "./model.js";

export const ISSUER = "askgate";
/** How far this machine's clock may be behind the server's, in seconds. */
export const DEFAULT_LEEWAY_S = 60;

/** What a receipt states. */
export interface ReceiptClaims {
  iss: string;
  tenant: string;
  session_id: string;
  rpc_id: string;
  action_digest: string;
  /** `ANSWERED`, `DEFAULTED`, `CANCELLED`, `EXPIRED`, ... */
  resolution: string;
  answers_digest: string;
  approvers: string[];
  resolved_by: string;
  iat: number;
  exp: number;
  /** The rpc_id: one decision, one jti. */
  jti: string;
}

/**
 * A receipt that must not be acted on: `kind` "malformed", "unknown_key" (signed by a
 * key the set does not hold), "bad_signature" (changed or forged), "expired" or
 * "wrong_action" (a receipt for another action than the one about to run).
 */
export class ReceiptError extends Error {
  constructor(
    readonly kind: "malformed" | "unknown_key" | "bad_signature" | "expired" | "wrong_action",
    message: string,
  ) {
    super(`${kind}: ${message}`);
    this.name = "ReceiptError";
  }
}

// The package is CommonJS (`module.exports = serialize`), which its typings describe as
// an ES default export: under NodeNext the default import is the function itself.
const canonicalize = canonicalizeModule as unknown as (input: unknown) => string | undefined;

function digest(value: unknown): string {
  return createHash("sha256")
    .update(canonicalize(value) ?? "", "utf8")
    .digest("hex");
}

/** Lowercase hex SHA-256 of the canonical JSON of `{"name", "arguments"}`. */
export function actionDigest(action: Action): string {
  let args: unknown;
  try {
    args = JSON.parse(action.argumentsJson);
  } catch (thrown) {
    throw new ReceiptError("malformed", `argumentsJson is not JSON: ${String(thrown)}`);
  }
  return digest({ name: action.name, arguments: args });
}

/** The digest of answers as the tool returns them; a secret question's entry is `{"id", "secret": true}`. */
export function answersDigest(
  answers: readonly QuestionAnswer[],
  isSecret: (id: string) => boolean = () => false,
): string {
  return digest(
    answers.map((a) =>
      isSecret(a.id)
        ? { id: a.id, secret: true }
        : a.custom === undefined
          ? { id: a.id, selected: [...a.selected] }
          : { id: a.id, selected: [...a.selected], custom: a.custom },
    ),
  );
}

/**
 * Checks `token` before `action` runs: signed (EdDSA) by a key of `jwks` (the server's
 * `/.well-known/jwks.json`), issued by askgate, not expired, and bound to this very
 * action. Resolves to its claims: what the resolution and answers allow is the
 * caller's to decide (an ANSWERED receipt may record a "Reject"). Rejects with
 * {@link ReceiptError}.
 */
export async function verifyReceipt(
  token: string,
  jwks: JSONWebKeySet,
  action: Action,
  { leewayS = DEFAULT_LEEWAY_S }: { leewayS?: number } = {},
): Promise<ReceiptClaims> {
  const expected = actionDigest(action);
  let alg: string | undefined;
  try {
    alg = decodeProtectedHeader(token).alg;
  } catch (thrown) {
    throw new ReceiptError("malformed", String(thrown));
  }
  if (alg !== "EdDSA") {
    throw new ReceiptError("malformed", `signed with ${alg}, not EdDSA`);
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
  if (claims.action_digest !== expected) {
    throw new ReceiptError(
      "wrong_action",
      `the receipt is for another action (digest ${claims.action_digest}, this action's ${expected})`,
    );
  }
  return claims;
}
