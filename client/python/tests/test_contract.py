"""The cross-language vectors (tests/contract/vectors.json): canonical JSON, action
digests, the answers JSON and its digest computed here as the Rust contract crate
(askgate-contract) computes them, which the server signs and chains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from askgate import Action
from askgate._model import Answer, answers_json
from askgate.receipts import ReceiptError, action_digest, answers_digest, canonical_json
from askgate.tool import answers_text
from askgate.v1 import askgate_pb2 as pb

VECTORS: Dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[3] / "tests" / "contract" / "vectors.json").read_text(encoding="utf-8")
)


def named(kind: str) -> Any:
    return pytest.mark.parametrize("case", VECTORS[kind], ids=[c["name"] for c in VECTORS[kind]])


@named("canonical")
def test_canonical_json(case: Dict[str, Any]) -> None:
    assert canonical_json(json.loads(case["json"])) == case["canonical"]


@named("action_digest")
def test_action_digest(case: Dict[str, Any]) -> None:
    action = Action(case["action"]["name"], case["action"]["arguments_json"])
    if "error" in case:
        with pytest.raises(ReceiptError) as refused:
            action_digest(action)
        assert refused.value.kind == {"inexact": "inexact", "not_json": "malformed"}[case["error"]]
    else:
        assert action_digest(action) == case["digest"]


@named("answers")
def test_answers_json(case: Dict[str, Any]) -> None:
    wire: List[pb.QuestionAnswer] = [pb.QuestionAnswer(**a) for a in case["answers"]]
    model = [Answer.of(a) for a in wire]
    secret = set(case["secret"])
    assert answers_text(model) == case["text"]
    assert canonical_json(answers_json(wire, secret.__contains__)) == case["canonical"]
    assert canonical_json(answers_json(model, secret.__contains__)) == case["canonical"]
    assert answers_digest(wire, secret.__contains__) == case["digest"]


def test_every_kind_has_cases() -> None:
    assert all(len(VECTORS[kind]) >= 3 for kind in ("canonical", "action_digest", "answers"))
