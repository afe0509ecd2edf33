"""The fake Slack's Block Kit checker refuses what Slack refuses, and takes a message
of the shape askgate sends. Run with pytest (scripts/test.sh does)."""

from __future__ import annotations

import copy

import pytest

import blockkit


def text(value: str) -> dict:
    return {"type": "plain_text", "text": value, "emoji": True}


def button(action_id: str, label: str = "Yes") -> dict:
    return {"type": "button", "text": text(label), "action_id": action_id, "value": "v"}


def option(label: str, value: str = "0") -> dict:
    return {"text": text(label), "value": value}


def message(*blocks: dict) -> dict:
    return {"channel": "C1", "text": "askgate: Ship it?", "blocks": list(blocks)}


def modal(*blocks: dict, title: str = "Answer") -> dict:
    return {
        "trigger_id": "t",
        "view": {
            "type": "modal",
            "callback_id": "askgate.answer",
            "title": text(title),
            "submit": text("Submit"),
            "close": text("Back"),
            "blocks": list(blocks),
        },
    }


HEADER = {"type": "header", "text": text("Deploy")}
SECTION = {"type": "section", "text": {"type": "mrkdwn", "text": "*Ship it?*", "verbatim": True}}
CHOICES = {
    "type": "actions",
    "block_id": "askgate.options.0",
    "elements": [button("askgate.choose.0", "yes"), button("askgate.choose.1", "no")],
}
INPUT = {
    "type": "input",
    "block_id": "q0",
    "optional": True,
    "label": text("Why?"),
    "element": {"type": "plain_text_input", "action_id": "text", "multiline": True},
}


def refused(method: str, body: dict) -> str:
    verdict = blockkit.check(method, body)
    assert verdict is not None, f"Slack refuses this, the checker took it: {body}"
    return f"{verdict.error}: {verdict.detail}"


def test_a_well_formed_message_and_modal_are_taken() -> None:
    assert blockkit.check("chat.postMessage", message(HEADER, SECTION, CHOICES)) is None
    assert blockkit.check("chat.update", {**message(HEADER, SECTION), "ts": "1.2"}) is None
    assert blockkit.check("views.open", modal(SECTION, INPUT)) is None


def test_an_action_id_repeated_within_its_block_is_refused() -> None:
    # What askgate sent before its buttons were numbered: Slack answers invalid_blocks.
    block = copy.deepcopy(CHOICES)
    for element in block["elements"]:
        element["action_id"] = "askgate.choose"
    assert "repeats within its block" in refused("chat.postMessage", message(block))


def test_the_same_action_id_in_two_blocks_is_taken() -> None:
    other = {**copy.deepcopy(CHOICES), "block_id": "askgate.options.1"}
    assert blockkit.check("chat.postMessage", message(CHOICES, other)) is None


def test_a_block_id_repeated_within_a_surface_is_refused() -> None:
    assert "block_id" in refused("chat.postMessage", message(CHOICES, copy.deepcopy(CHOICES)))
    assert "block_id" in refused("views.open", modal(INPUT, copy.deepcopy(INPUT)))


def test_an_actions_block_holds_at_most_25_elements() -> None:
    ok = {"type": "actions", "elements": [button(f"b{i}") for i in range(25)]}
    assert blockkit.check("chat.postMessage", message(ok)) is None
    over = {"type": "actions", "elements": [button(f"b{i}") for i in range(26)]}
    assert "25" in refused("chat.postMessage", message(over))


@pytest.mark.parametrize("kind", ["checkboxes", "radio_buttons"])
def test_checkboxes_and_radio_buttons_hold_at_most_10_options(kind: str) -> None:
    def block(count: int) -> dict:
        options = [option(f"o{i}", str(i)) for i in range(count)]
        return {"type": "actions", "elements": [{"type": kind, "action_id": "c", "options": options}]}

    assert blockkit.check("chat.postMessage", message(block(10))) is None
    assert "at most 10" in refused("chat.postMessage", message(block(11)))


@pytest.mark.parametrize("kind", ["static_select", "multi_static_select"])
def test_a_menu_holds_at_most_100_options(kind: str) -> None:
    def block(count: int) -> dict:
        element = {
            "type": kind,
            "action_id": "c",
            "placeholder": text("Choose…"),
            "options": [option(f"o{i}", str(i)) for i in range(count)],
        }
        return {"type": "actions", "elements": [element]}

    assert blockkit.check("chat.postMessage", message(block(100))) is None
    assert "100" in refused("chat.postMessage", message(block(101)))


def test_option_text_and_value_lengths() -> None:
    def block(label: str, value: str) -> dict:
        element = {"type": "checkboxes", "action_id": "c", "options": [option(label, value)]}
        return {"type": "actions", "elements": [element]}

    assert blockkit.check("chat.postMessage", message(block("x" * 75, "v" * 150))) is None
    assert "75" in refused("chat.postMessage", message(block("x" * 76, "v")))
    assert "150" in refused("chat.postMessage", message(block("x", "v" * 151)))


def test_button_text_header_and_section_lengths() -> None:
    assert "75" in refused(
        "chat.postMessage", message({"type": "actions", "elements": [button("b", "x" * 76)]})
    )
    assert "150" in refused("chat.postMessage", message({"type": "header", "text": text("x" * 151)}))
    long = {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}
    assert "3000" in refused("chat.postMessage", message(long))
    assert blockkit.check("chat.postMessage", message({**long, "text": {"type": "mrkdwn", "text": "x" * 3000}})) is None


def test_a_message_holds_50_blocks_and_a_modal_100() -> None:
    assert blockkit.check("chat.postMessage", message(*[SECTION] * 50)) is None
    assert "at most 50" in refused("chat.postMessage", message(*[SECTION] * 51))
    assert blockkit.check("views.open", modal(*[SECTION] * 100)) is None
    assert "100" in refused("views.open", modal(*[SECTION] * 101))


def test_a_modal_title_holds_24_characters() -> None:
    assert blockkit.check("views.open", modal(SECTION, title="x" * 24)) is None
    assert "24" in refused("views.open", modal(SECTION, title="x" * 25))


@pytest.mark.parametrize("blank", ["", "   "])
def test_no_text_is_empty(blank: str) -> None:
    assert "empty" in refused("chat.postMessage", message({"type": "header", "text": text(blank)}))
    assert "empty" in refused("views.open", modal(SECTION, title=blank))


def test_unknown_blocks_and_fields_are_refused() -> None:
    assert "unknown block type" in refused("chat.postMessage", message({"type": "banner", "text": text("x")}))
    assert "does not define" in refused("chat.postMessage", message({**HEADER, "colour": "red"}))
    odd_button = {**button("b"), "tooltip": "x"}
    assert "does not define" in refused(
        "chat.postMessage", message({"type": "actions", "elements": [odd_button]})
    )


def test_a_message_needs_text_or_blocks() -> None:
    assert refused("chat.postMessage", {"channel": "C1"}).startswith("no_text")


def test_each_method_needs_its_arguments() -> None:
    no_channel = {k: v for k, v in message(SECTION).items() if k != "channel"}
    assert refused("chat.postMessage", no_channel).startswith("channel_not_found")
    assert refused("chat.update", message(SECTION)).startswith("message_not_found")
    no_trigger = modal(SECTION)
    del no_trigger["trigger_id"]
    assert refused("views.open", no_trigger).startswith("invalid_trigger_id")
    ephemeral = {"channel": "C1", "text": "Only ana may answer this."}
    assert refused("chat.postEphemeral", ephemeral).startswith("user_not_in_channel")
    assert refused("chat.postEphemeral", {"channel": "C1", "user": "U1"}).startswith("no_text")
    assert blockkit.check("chat.postEphemeral", {**ephemeral, "user": "U1"}) is None


def test_metadata_has_an_alphanumeric_event_type_and_an_object_payload() -> None:
    metadata = {"event_type": "askgate_ask", "event_payload": {"rpc_id": "r1"}}
    assert blockkit.check("chat.postMessage", {**message(SECTION), "metadata": metadata}) is None
    for bad in (
        {"event_type": "has space", "event_payload": {}},
        {"event_type": "", "event_payload": {}},
        {"event_type": "a", "event_payload": ["list"]},
        {"event_type": "a"},
        "text",
    ):
        assert refused("chat.postMessage", {**message(SECTION), "metadata": bad}).startswith(
            "invalid_metadata_format"
        )
