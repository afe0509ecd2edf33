"""Receipts: what an executor checks before it runs an action a human approved
(docs/approvals.md). Needs the `receipts` extra (PyJWT and rfc8785).

    import json, urllib.request
    from askgate import Action, Client
    from askgate.receipts import verify_receipt

    jwks = json.load(urllib.request.urlopen("http://127.0.0.1:50051/.well-known/jwks.json"))
    action = Action.of("deploy", {"env": "prod"})
    claims = verify_receipt(result.receipt, jwks, action, tenant="acme")  # approved, or raises
    with Client() as client:
        client.consume_receipt(result.receipt)  # once: a replay raises RECEIPT_CONSUMED
    run(action)

`Client.check_receipt` does both. A receipt is a compact JWS (EdDSA, Ed25519) whose
claims bind a decision to the tenant and to the digest of the action the human saw:
SHA-256 over the RFC 8785 canonical JSON of `{"name": ..., "arguments": ...}`, the same
in every askgate client. One key may sign every tenant's receipts: the tenant check is
what keeps another tenant's approval from running this one's action.
"""

from __future__ import annotations

import decimal
import hashlib
import json
from typing import Any, Callable, Dict, Mapping, Sequence

from ._model import Action, answers_json
from .v1 import askgate_pb2 as pb

ISSUER = "askgate"
#: How far this machine's clock may be behind the server's, in seconds.
DEFAULT_LEEWAY = 60.0
#: The `typ` of a signed audit head (never a receipt).
AUDIT_HEAD_TYPE = "askgate-audit-head+jwt"
#: The largest integer a double holds with every smaller one: 2**53 - 1.
MAX_SAFE_INTEGER = 2**53 - 1
#: What a receipt's `decision` says when the action may run.
APPROVED = "approved"


class ReceiptError(Exception):
    """A receipt that must not be acted on. `kind`: "malformed", "unknown_key" (signed
    by a key the set does not hold), "bad_signature" (changed or forged), "expired",
    "wrong_tenant" (another tenant's receipt), "wrong_action" (a receipt for another
    action than the one about to run), "inexact" (the action's arguments hold a number
    a double would change: it has no exact digest) or "not_approved" (a valid receipt
    whose decision is rejected, defaulted, cancelled, expired or aborted; `claims`
    holds it)."""

    def __init__(self, kind: str, message: str, claims: Dict[str, Any] | None = None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.claims = claims


def canonical_json(value: Any) -> str:
    """RFC 8785 canonical JSON of `value` (keys in UTF-16 order, no spaces, numbers as
    ECMAScript prints them): what every digest is taken over, the same text in every
    askgate SDK (tests/contract/vectors.json)."""
    import rfc8785

    return rfc8785.dumps(value).decode("utf-8")


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def _exact_int(text: str) -> int:
    value = int(text)
    if abs(value) > MAX_SAFE_INTEGER:
        raise ReceiptError("inexact", f"arguments_json holds {text[:64]}, an integer beyond ±(2^53 - 1): send it as a string")
    return value


def _exact_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ReceiptError("inexact", f"arguments_json holds {text[:64]}, beyond the range of a double")
    if decimal.Decimal(text) != decimal.Decimal(repr(value)):
        raise ReceiptError("inexact", f"arguments_json holds {text[:64]}, not exactly a double: send it as a string")
    return value


def action_digest(action: Action) -> str:
    """Lowercase hex SHA-256 of the canonical JSON of `{"name", "arguments"}`. The
    arguments must be I-JSON (RFC 7493): every number exact in a double."""
    try:
        arguments = json.loads(action.arguments_json, parse_int=_exact_int, parse_float=_exact_float)
    except ValueError as error:
        raise ReceiptError("malformed", f"arguments_json is not JSON: {error}") from None
    return _digest({"name": action.name, "arguments": arguments})


def answers_digest(
    answers: Sequence[pb.QuestionAnswer], is_secret: Callable[[str], bool] = lambda _: False
) -> str:
    """The digest of answers as the tool returns them; a secret question's entry is
    `{"id": ..., "secret": true}`."""
    return _digest(answers_json(answers, is_secret))


def _signing_key(token: str, jwks: Mapping[str, Any], typ_wanted: str | None) -> Any:
    import jwt

    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as error:
        raise ReceiptError("malformed", str(error)) from None
    if header.get("alg") != "EdDSA":
        raise ReceiptError("malformed", f"signed with {header.get('alg')}, not EdDSA")
    if (header.get("typ") == AUDIT_HEAD_TYPE) != (typ_wanted == AUDIT_HEAD_TYPE):
        raise ReceiptError("malformed", f"a JWS of type {header.get('typ')}, not what was asked for")
    keys = [k for k in jwks.get("keys", []) if k.get("kid") == header.get("kid")]
    if not keys:
        raise ReceiptError("unknown_key", "signed with a key the key set does not hold")
    return jwt.PyJWK.from_dict(keys[0], algorithm="EdDSA").key


def verify_receipt(
    token: str,
    jwks: Mapping[str, Any],
    action: Action,
    *,
    tenant: str,
    leeway: float = DEFAULT_LEEWAY,
    any_decision: bool = False,
) -> Dict[str, Any]:
    """Checks `token` before `action` runs for `tenant`: signed (EdDSA) by a key of
    `jwks` (the server's `/.well-known/jwks.json`, parsed), issued by askgate, not
    expired, of this tenant, bound to this very action, and deciding `approved`.
    Returns its claims (with `decision` and `asked_by`, the subject that asked).
    Raises `ReceiptError`; with `any_decision=True` a valid receipt of another decision
    is returned rather than raised (to record a "no")."""
    import jwt

    expected = action_digest(action)
    key = _signing_key(token, jwks, None)
    try:
        claims: Dict[str, Any] = jwt.decode(
            token,
            key=key,
            algorithms=["EdDSA"],
            issuer=ISSUER,
            leeway=leeway,
            options={"require": ["exp", "iss"], "verify_aud": False},
        )
    except jwt.ExpiredSignatureError:
        raise ReceiptError("expired", "the receipt has expired") from None
    except jwt.InvalidSignatureError:
        raise ReceiptError("bad_signature", "the receipt's signature does not verify") from None
    except jwt.PyJWTError as error:
        raise ReceiptError("malformed", str(error)) from None
    if claims.get("tenant") != tenant:
        raise ReceiptError("wrong_tenant", f"the receipt is of tenant {claims.get('tenant')!r}, not {tenant!r}")
    if claims.get("action_digest") != expected:
        raise ReceiptError(
            "wrong_action",
            f"the receipt is for another action (digest {claims.get('action_digest')}, "
            f"this action's {expected})",
        )
    decision = claims.get("decision") or "not stated"
    if not any_decision and decision != APPROVED:
        raise ReceiptError("not_approved", f"the receipt's decision is {decision}, not approved", claims)
    return claims


def verify_audit_head(jws: str, jwks: Mapping[str, Any], *, tenant: str) -> Dict[str, Any]:
    """Checks a signed audit head (`AuditHead.jws`, the last line of `askgate audit
    export`): signed by a key of `jwks`, an audit head, of `tenant`. Returns what it
    states: `tenant`, `seq`, `hash`, `at`."""
    import jwt

    key = _signing_key(jws, jwks, AUDIT_HEAD_TYPE)
    try:
        head: Dict[str, Any] = jwt.decode(
            jws, key=key, algorithms=["EdDSA"], options={"verify_aud": False, "verify_exp": False}
        )
    except jwt.InvalidSignatureError:
        raise ReceiptError("bad_signature", "the head's signature does not verify") from None
    except jwt.PyJWTError as error:
        raise ReceiptError("malformed", str(error)) from None
    if head.get("tenant") != tenant:
        raise ReceiptError("wrong_tenant", f"the head is of tenant {head.get('tenant')!r}, not {tenant!r}")
    return head
