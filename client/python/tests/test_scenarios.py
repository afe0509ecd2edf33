"""The shared scenarios (tests/scenarios/scenarios.json), run by this SDK against a
real askgate: the same list the Rust and TypeScript clients run."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Dict, List, Optional

import grpc
import pytest

from askgate import AgentLease, Approvers, Ask, AskgateError, Client, Reason, question
from askgate.v1 import askgate_pb2 as pb
from conftest import ASKGATE, WAIT, Proxy, Server, eventually

SCENARIOS: Dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[3] / "tests" / "scenarios" / "scenarios.json").read_text(encoding="utf-8")
)


def question_of(q: Dict[str, Any]) -> pb.Question:
    return question(
        q["id"],
        q["question"],
        header=q.get("header"),
        detail=q.get("detail"),
        options=q.get("options", []),
        multi_select=q.get("multi_select", False),
        plan_review=q.get("plan_review"),
    )


def answer_of(a: Dict[str, Any]) -> pb.QuestionAnswer:
    return pb.QuestionAnswer(id=a["id"], selected=a.get("selected", []), custom=a.get("custom"))


def expect_error(error: Optional[BaseException], expected: Dict[str, Any], what: str) -> None:
    assert isinstance(error, AskgateError), f"{what}: expected {expected['reason']}, got {error!r}"
    assert error.reason is Reason(expected["reason"]), f"{what}: {error}"
    assert error.code.value[0] == SCENARIOS["codes"][expected["code"]], f"{what}: the code of {error}"
    for key, value in expected.get("metadata", {}).items():
        assert error.metadata.get(key) == value, f"{what}: metadata {key} of {error.metadata}"
    if "violations" in expected:
        assert [field for field, _ in error.violations] == expected["violations"]


class Background:
    """A call on a thread; `result()` waits for what it returned or raised."""

    def __init__(self, call) -> None:  # type: ignore[no-untyped-def]
        self.done = threading.Event()
        self.value: Any = None
        self.error: Optional[BaseException] = None
        threading.Thread(target=self._run, args=(call,), daemon=True).start()

    def _run(self, call) -> None:  # type: ignore[no-untyped-def]
        try:
            self.value = call()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            self.error = error
        finally:
            self.done.set()

    def wait(self, what: str) -> None:
        assert self.done.wait(WAIT), f"timed out waiting for {what}"


class Follower:
    """A `follow` iterated on a thread, so that each event is awaited with a bound."""

    def __init__(self, events) -> None:  # type: ignore[no-untyped-def]
        self.queue: "queue.Queue[Any]" = queue.Queue()
        threading.Thread(target=self._pump, args=(events,), daemon=True).start()

    def _pump(self, events) -> None:  # type: ignore[no-untyped-def]
        try:
            for event in events:
                self.queue.put(event)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            self.queue.put(error)

    def next(self, what: str) -> Any:
        try:
            return self.queue.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError(f"timed out waiting for {what}") from None


class Run:
    def __init__(self, server: Server, proxy: Proxy, tokens: Dict[str, str]) -> None:
        self.server, self.proxy, self.tokens = server, proxy, tokens
        self.clients: Dict[str, Client] = {}
        self.asks: Dict[str, Dict[str, Any]] = {}
        self.follows: Dict[str, Follower] = {}
        self.leases: Dict[str, Any] = {}
        self.stack = ExitStack()

    def client(
        self, key: Optional[str] = None, via: Optional[str] = None, channel: Optional[str] = None
    ) -> Client:
        name = f"{key or ''}@{via or 'direct'}#{channel or ''}"
        if name not in self.clients:
            addr = self.proxy.addr if via == "proxy" else self.server.addr
            token = self.tokens.get(key) if key else None
            self.clients[name] = Client(addr, token=token, channel=channel)
        return self.clients[name]

    def outcome(self, step: Dict[str, Any], what: str, call) -> None:  # type: ignore[no-untyped-def]
        done = Background(call)
        done.wait(what)
        if "error" in step:
            expect_error(done.error, step["error"], what)
        elif done.error is not None:
            raise done.error

    def step(self, step: Dict[str, Any]) -> None:
        do = step["do"]
        if do == "ask":
            agent = step.get("agent")
            if "lease" in step:
                lease = self.leases[step["lease"]]
                agent = {"agent_id": lease["agent_id"], "incarnation": lease["lease"].incarnation}
            ask = Ask(
                step["session"],
                [question_of(q) for q in step["questions"]],
                hold=step.get("hold", False),
                timeout=step["timeout_ms"] / 1000 if "timeout_ms" in step else None,
                request_id=step.get("request_id", str(uuid.uuid4())),
                agent=(agent["agent_id"], agent["incarnation"]) if agent else None,
                notify=pb.NotifyPolicy(**step["notify"]) if "notify" in step else None,
                allowed_channels=step.get("allowed_channels", ()),
                approvers=Approvers(**step["approvers"]) if "approvers" in step else None,
                default_answers=[answer_of(a) for a in step.get("default_answers", [])],
                ttl=step["ttl_ms"] / 1000 if "ttl_ms" in step else None,
                quorum=step.get("quorum"),
            )
            client = self.client(step.get("key"), step.get("via"))
            self.asks[step["name"]] = {
                "ask": ask,
                "key": step.get("key"),
                "rpc_id": None,
                "call": Background(lambda: client.ask(ask)),
            }
        elif do == "pending":
            ask = self.asks[step["ask"]]
            client = self.client(ask["key"])
            known = {a["rpc_id"] for a in self.asks.values() if a["rpc_id"]}
            pending = eventually(
                f"{step['ask']} to be pending",
                lambda: next((p for p in client.list_pending(ask["ask"].session_id) if p.rpc_id not in known), None),
            )
            ask["rpc_id"] = pending.rpc_id
        elif do in ("answer", "cancel", "abort"):
            ask = self.asks[step["ask"]]
            client = self.client(step.get("key"), channel=step.get("channel"))
            session = ask["ask"].session_id
            if do == "answer":
                answers = [answer_of(a) for a in step["answers"]]
                self.outcome(step, f"answer {step['ask']}", lambda: client.answer(session, ask["rpc_id"], answers))
            elif do == "cancel":
                reason = step.get("reason", "")
                self.outcome(step, f"cancel {step['ask']}", lambda: client.cancel(session, ask["rpc_id"], reason))
            else:
                request_id = ask["ask"].request_id
                self.outcome(step, f"abort {step['ask']}", lambda: client.abort(session, request_id))
        elif do == "outcome":
            ask = self.asks[step["ask"]]
            call: Background = ask["call"]
            call.wait(f"the outcome of {step['ask']}")
            if "error" in step:
                expect_error(call.error, step["error"], f"ask {step['ask']}")
            else:
                assert call.error is None, f"ask {step['ask']} failed: {call.error}"
                got = [
                    {"id": a.id, "selected": a.selected, **({"custom": a.custom} if a.custom is not None else {})}
                    for a in call.value.answers
                ]
                assert got == [{"selected": [], **a} for a in step["answers"]]
                assert call.value.resolved_by == step["resolved_by"]
                assert call.value.resolution == step.get("resolution", "ANSWERED")
                if "approvers" in step:
                    assert call.value.approvers == step["approvers"]
                if ask["rpc_id"]:
                    assert call.value.rpc_id == ask["rpc_id"], "the answer of the same ask"
        elif do == "follow":
            client = self.client(step.get("key"), step.get("via"))
            events = client.follow(step["session"], after=step.get("after"), exclusive=step.get("exclusive", False))
            self.follows[step["name"]] = Follower(events)
        elif do == "event":
            got = self.follows[step["follow"]].next(f"an event of {step['follow']}")
            if "error" in step:
                expect_error(got if isinstance(got, BaseException) else None, step["error"], f"follow {step['follow']}")
                return
            if isinstance(got, BaseException):
                raise got
            kinds = {
                "requested": got.requested,
                "resolved": got.resolved,
                "reminder": got.reminder,
                "escalated": got.escalated,
                "approval": got.approval,
                "synced": got.synced,
                "reset": got.reset,
            }
            kind = next(k for k, v in kinds.items() if v)
            assert kind == step["kind"], f"follow {step['follow']}: {got}"
            if kind == "synced":
                assert got.resumed == step["resumed"], "synced.resumed"
            elif kind in ("requested", "resolved", "reminder", "escalated", "approval"):
                ask = self.asks[step["ask"]]
                rpc_id = kinds[kind].rpc_id
                ask["rpc_id"] = ask["rpc_id"] or rpc_id
                assert rpc_id == ask["rpc_id"], f"the {kind} event of {step['ask']}"
                if "resolution" in step:
                    assert pb.Resolution.Name(got.resolved.reason) == step["resolution"]
                if kind == "approval":
                    approval = got.approval
                    assert (approval.subject, approval.count, approval.needed) == (
                        step["subject"],
                        step["count"],
                        step["needed"],
                    )
        elif do == "cut":
            self.proxy.cut()
        elif do == "restore":
            self.proxy.restore()
        elif do == "attach":
            parent = self.leases[step["parent"]]["agent_id"] if "parent" in step else ""
            client = self.client(step.get("key"))
            held = ExitStack()

            def attach() -> AgentLease:
                return held.enter_context(client.attach(step["agent_id"], parent))

            done = Background(attach)
            done.wait(f"attach {step['name']}")
            if "error" in step:
                expect_error(done.error, step["error"], f"attach {step['name']}")
                return
            if done.error is not None:
                raise done.error
            self.stack.push(held)
            self.leases[step["name"]] = {"agent_id": step["agent_id"], "lease": done.value, "held": held}
        elif do == "detach":
            self.leases[step["lease"]]["held"].close()
        else:
            pytest.fail(f"a step this runner does not know: {step}")

    def close(self) -> None:
        self.stack.close()
        for client in self.clients.values():
            client.close()


def keys_file(directory: Path, keys: Dict[str, Dict[str, Any]]) -> tuple[Path, Dict[str, str]]:
    path = directory / "keys.json"
    tokens = {}
    for name, key in keys.items():
        args = [ASKGATE, "keys", "add", "--file", str(path), "--tenant", key["tenant"], "--sub", key["sub"]]
        args += ["--roles", ",".join(key["roles"])]
        if "sessions" in key:
            args += ["--sessions", ",".join(key["sessions"])]
        tokens[name] = subprocess.run(args, check=True, capture_output=True, text=True, timeout=WAIT).stdout.strip()
    return path, tokens


@pytest.mark.parametrize("scenario", SCENARIOS["scenarios"], ids=lambda s: s["name"])
def test_scenario(scenario: Dict[str, Any], tmp_path: Path) -> None:
    args: List[str] = list(scenario.get("server", {}).get("args", []))
    tokens: Dict[str, str] = {}
    if "keys" in scenario.get("server", {}):
        path, tokens = keys_file(tmp_path, scenario["server"]["keys"])
        args += ["--auth", "keys", "--keys-file", str(path)]
    server = Server(*args)
    proxy = Proxy(server.addr)
    run = Run(server, proxy, tokens)
    try:
        for number, step in enumerate(scenario["steps"], 1):
            try:
                run.step(step)
            except AssertionError as failed:
                raise AssertionError(f"step {number} ({step['do']}): {failed}") from None
    finally:
        run.close()
        proxy.close()
        server.stop()


@pytest.mark.parametrize(
    "case", SCENARIOS["retries"]["cases"], ids=lambda c: f"{c['reason']}-{c['code']}"
)
def test_the_client_retries_exactly_the_shared_list(case: Dict[str, Any]) -> None:
    number = SCENARIOS["codes"][case["code"]]
    code = next(c for c in grpc.StatusCode if c.value[0] == number)
    error = AskgateError(Reason(case["reason"]), code, "a failure")
    assert error.retryable is case["retryable"], case
