"""Block Kit rules, as Slack enforces them, for the integration tests' fake Slack.

The fake Slack Web API in tests/integration/slack.rs hands every `chat.postMessage`,
`chat.update` and `views.open` body to this checker and answers as Slack does:
`{"ok": false, "error": "invalid_blocks"}` (or `invalid_arguments` for a bad view)
when it breaks a rule. The rules come from the official Slack SDK for Python
(`slack_sdk.models`), which parses each block into its model and validates every
length and count Slack documents; on top of that this module adds the rules the SDK
does not check but Slack's reference states:

- an `action_id` is unique within its block (Slack refuses the message otherwise);
- a `block_id` is unique within a message or a view;
- checkboxes and radio buttons hold at most 10 options;
- a message holds at most 50 blocks;
- no text object is empty or blank (stricter than Slack may be: a blank label
  shows nothing either way);
- a block or element the SDK does not know, or a field it would drop, is refused
  (Slack answers `invalid_blocks` for unknown fields too);
- each method's required arguments are there: `channel` (and `ts` for an update),
  `trigger_id` for a view;
- a message's `metadata` has an alphanumeric `event_type` and an object
  `event_payload` (Slack answers `invalid_metadata_format`), read with the SDK's
  `Metadata` model.

Run as a program, it reads one JSON request per line on stdin,
`{"method": "chat.postMessage", "body": {...}}`, and writes one verdict per line on
stdout: `{"ok": true}` or `{"ok": false, "error": "invalid_blocks", "detail": "..."}`.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import warnings
from typing import Any, Iterator, Optional

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block
from slack_sdk.models.metadata import Metadata
from slack_sdk.models.views import View

MAX_MESSAGE_BLOCKS = 50
MAX_INLINE_OPTIONS = 10
# chat.postMessage's `text` is cut by Slack at 40,000 characters; beyond that the call
# fails with msg_too_long.
MAX_MESSAGE_TEXT = 40_000


class Refused(Exception):
    """A body Slack would refuse: `error` is Slack's error code, `detail` says why."""

    def __init__(self, error: str, detail: str) -> None:
        super().__init__(f"{error}: {detail}")
        self.error = error
        self.detail = detail


def _walk(value: Any, path: str) -> Iterator[tuple[str, dict]]:
    """Every JSON object under `value`, with its path."""
    if isinstance(value, dict):
        yield path, value
        for key, inner in value.items():
            yield from _walk(inner, f"{path}.{key}")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _walk(inner, f"{path}[{index}]")


def _normalized(value: Any) -> Any:
    """`value` without the nulls and empty lists the SDK leaves out of its dicts."""
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def _check_own_rules(blocks: list, where: str) -> None:
    block_ids: set[str] = set()
    for index, block in enumerate(blocks):
        at = f"{where}[{index}]"
        if not isinstance(block, dict):
            raise Refused("invalid_blocks", f"{at} is not an object")
        block_id = block.get("block_id")
        if block_id is not None:
            if block_id in block_ids:
                raise Refused("invalid_blocks", f"{at}: block_id {block_id!r} repeats within the surface")
            block_ids.add(block_id)
        action_ids: set[str] = set()
        for path, obj in _walk(block, at):
            kind = obj.get("type")
            if kind in ("plain_text", "mrkdwn") and not str(obj.get("text") or "").strip():
                raise Refused("invalid_blocks", f"{path}: a {kind} text must not be empty")
            if kind in ("checkboxes", "radio_buttons") and len(obj.get("options") or []) > MAX_INLINE_OPTIONS:
                raise Refused(
                    "invalid_blocks",
                    f"{path}: {kind} hold at most {MAX_INLINE_OPTIONS} options, not {len(obj['options'])}",
                )
            action_id = obj.get("action_id")
            if action_id is not None:
                if action_id in action_ids:
                    raise Refused("invalid_blocks", f"{path}: action_id {action_id!r} repeats within its block")
                action_ids.add(action_id)


def _check_with_sdk(blocks: list, where: str) -> None:
    for index, raw in enumerate(blocks):
        at = f"{where}[{index}]"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                block = Block.parse(raw)
            except (TypeError, ValueError, KeyError, AttributeError) as error:
                raise Refused("invalid_blocks", f"{at}: {error}") from error
        if block is None or type(block) is Block:
            raise Refused("invalid_blocks", f"{at}: unknown block type {raw.get('type')!r}")
        try:
            rebuilt = block.to_dict()
        except SlackObjectFormationError as error:
            raise Refused("invalid_blocks", f"{at}: {error}") from error
        if _normalized(rebuilt) != _normalized(raw):
            raise Refused(
                "invalid_blocks",
                f"{at}: holds fields or elements Block Kit does not define: "
                f"sent {json.dumps(raw, sort_keys=True)}, "
                f"Block Kit keeps {json.dumps(rebuilt, sort_keys=True)}",
            )


def check_blocks(blocks: Any, where: str, limit: int) -> None:
    if not isinstance(blocks, list):
        raise Refused("invalid_blocks", f"{where} is not an array")
    if len(blocks) > limit:
        raise Refused("invalid_blocks", f"{where} holds {len(blocks)} blocks; at most {limit} are allowed")
    _check_own_rules(blocks, where)
    _check_with_sdk(blocks, where)


def check_metadata(metadata: Any) -> None:
    """A message's `metadata`: `{"event_type": "...", "event_payload": {...}}`."""
    if not isinstance(metadata, dict) or set(metadata) != {"event_type", "event_payload"}:
        raise Refused("invalid_metadata_format", "metadata holds event_type and event_payload")
    event_type = metadata["event_type"]
    if not isinstance(event_type, str) or not re.fullmatch(r"[A-Za-z0-9_]+", event_type):
        raise Refused("invalid_metadata_format", f"event_type {event_type!r} is not alphanumeric")
    payload = metadata["event_payload"]
    if not isinstance(payload, dict):
        raise Refused("invalid_metadata_format", "event_payload is not an object")
    Metadata(event_type=event_type, event_payload=payload).to_dict()


def check_message(body: dict) -> None:
    """A `chat.postMessage`, `chat.update` or `chat.postEphemeral` body."""
    if "metadata" in body:
        check_metadata(body["metadata"])
    text = body.get("text")
    blocks = body.get("blocks")
    if blocks is None and not text:
        raise Refused("no_text", "a message needs text or blocks")
    if text is not None and len(text) > MAX_MESSAGE_TEXT:
        raise Refused("msg_too_long", f"text holds {len(text)} characters")
    if blocks is not None:
        check_blocks(blocks, "blocks", MAX_MESSAGE_BLOCKS)


def check_view(view: Any) -> None:
    """The `view` of a `views.open`."""
    if not isinstance(view, dict):
        raise Refused("invalid_arguments", "view is not an object")
    blocks = view.get("blocks")
    check_blocks(blocks, "view.blocks", View.blocks_max_length)
    rest = {k: v for k, v in view.items() if k != "blocks"}
    for path, obj in _walk(rest, "view"):
        if obj.get("type") in ("plain_text", "mrkdwn") and not str(obj.get("text") or "").strip():
            raise Refused("invalid_arguments", f"{path}: a text must not be empty")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            parsed = View(**rest, blocks=blocks)
            parsed.to_dict()
        except (TypeError, ValueError, SlackObjectFormationError) as error:
            raise Refused("invalid_arguments", f"view: {error}") from error


def _require(body: dict, field: str, error: str) -> None:
    """A required argument of the method, a non-empty string (Slack answers `error`)."""
    value = body.get(field)
    if not isinstance(value, str) or not value:
        raise Refused(error, f"{field} is required")


def check(method: str, body: Any) -> Optional[Refused]:
    """Why Slack would refuse `body` sent to `method`, or None when it would take it."""
    if not isinstance(body, dict):
        return Refused("invalid_json", "the body is not a JSON object")
    try:
        if method in ("chat.postMessage", "chat.update", "chat.postEphemeral"):
            _require(body, "channel", "channel_not_found")
            if method == "chat.update":
                _require(body, "ts", "message_not_found")
            if method == "chat.postEphemeral":
                # Slack's reference: `user` is required; one not in the channel is
                # `user_not_in_channel`.
                _require(body, "user", "user_not_in_channel")
            check_message(body)
        elif method == "views.open":
            _require(body, "trigger_id", "invalid_trigger_id")
            check_view(body.get("view"))
    except Refused as refused:
        return refused
    return None


def main() -> None:
    logging.disable(logging.CRITICAL)
    for line in sys.stdin:
        request = json.loads(line)
        refused = check(request["method"], request["body"])
        if refused is None:
            verdict: dict = {"ok": True}
        else:
            verdict = {"ok": False, "error": refused.error, "detail": refused.detail}
        sys.stdout.write(json.dumps(verdict) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
