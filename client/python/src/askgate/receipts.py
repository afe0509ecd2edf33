"""Receipts: what an executor checks before it runs an action a human approved
(docs/approvals.md). Needs the `receipts` extra: `pip install "askgate[receipts]"`.

    import json, urllib.request
    from askgate import Action
    from askgate.receipts import verify_receipt

    jwks = json.load(urllib.request.urlopen("http://127.0.0.1:50051/.well-known/jwks.json"))
    claims = verify_receipt(result.receipt, jwks, Action.of("deploy", {"env": "prod"}))
    assert claims["resolution"] == "ANSWERED"

A receipt is a compact JWS (EdDSA, Ed25519) whose claims bind a resolution to the
digest of the action the human saw: SHA-256 over the RFC 8785 canonical JSON of
`{"name": ..., "arguments": ...}`, the same in every askgate client.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Dict, Mapping, Sequence

from ._model import Action
from .v1 import askgate_pb2 as pb

ISSUER = "askgate"
#: How far this machine's clock may be behind the server's, in seconds.
DEFAULT_LEEWAY = 60.0


class ReceiptError(Exception):
    """A receipt that must not be acted on. `kind`: "malformed", "unknown_key" (signed
    by a key the set does not hold), "bad_signature" (changed or forged), "expired",
    or "wrong_action" (a receipt for another action than the one about to run)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def _digest(value: Any) -> str:
    import rfc8785

    return hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def action_digest(action: Action) -> str:
    """Lowercase hex SHA-256 of the canonical JSON of `{"name", "arguments"}`."""
    try:
        arguments = json.loads(action.arguments_json)
    except ValueError as error:
        raise ReceiptError("malformed", f"arguments_json is not JSON: {error}") from None
    return _digest({"name": action.name, "arguments": arguments})


def answers_digest(
    answers: Sequence[pb.QuestionAnswer], is_secret: Callable[[str], bool] = lambda _: False
) -> str:
    """The digest of answers as the tool returns them; a secret question's entry is
    `{"id": ..., "secret": true}`."""
    entries = []
    for answer in answers:
        if is_secret(answer.id):
            entries.append({"id": answer.id, "secret": True})
            continue
        entry: Dict[str, Any] = {"id": answer.id, "selected": list(answer.selected)}
        if answer.HasField("custom"):
            entry["custom"] = answer.custom
        entries.append(entry)
    return _digest(entries)


def verify_receipt(
    token: str, jwks: Mapping[str, Any], action: Action, *, leeway: float = DEFAULT_LEEWAY
) -> Dict[str, Any]:
    """Checks `token` before `action` runs: signed (EdDSA) by a key of `jwks` (the server's
    `/.well-known/jwks.json`, parsed), issued by askgate, not expired, and bound to this
    very action. Returns its claims; what the resolution and answers allow is the
    caller's to decide (an ANSWERED receipt may record a "Reject"). Raises
    `ReceiptError`."""
    import jwt

    expected = action_digest(action)
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as error:
        raise ReceiptError("malformed", str(error)) from None
    if header.get("alg") != "EdDSA":
        raise ReceiptError("malformed", f"signed with {header.get('alg')}, not EdDSA")
    keys = [k for k in jwks.get("keys", []) if k.get("kid") == header.get("kid")]
    if not keys:
        raise ReceiptError("unknown_key", "signed with a key the key set does not hold")
    key = jwt.PyJWK.from_dict(keys[0], algorithm="EdDSA").key
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
    if claims.get("action_digest") != expected:
        raise ReceiptError(
            "wrong_action",
            f"the receipt is for another action (digest {claims.get('action_digest')}, "
            f"this action's {expected})",
        )
    return claims
