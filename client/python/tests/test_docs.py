"""docs/approvals.md's executor check in Python, run as written against a real askgate:
the receipt of an approved deploy of tenant acme approves it once, and a replay of it
runs nothing (RECEIPT_CONSUMED)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from askgate import Action, Ask, AskgateError, Client, question, select
from conftest import ASKGATE, WAIT, Server, eventually
from test_approvals import key_file

DOCS = Path(__file__).resolve().parents[3] / "docs" / "approvals.md"


def snippet(name: str) -> str:
    """A code block of docs/approvals.md, by the `<!-- snippet: NAME -->` line before it."""
    found = re.search(rf"<!-- snippet: {name} -->\n```\w*\n(.*?)```", DOCS.read_text(), re.S)
    assert found, f"docs/approvals.md has no snippet {name}"
    return found.group(1)


def key(keys: Path, sub: str, roles: str) -> str:
    made = subprocess.run(
        [ASKGATE, "keys", "add", "--file", str(keys), "--tenant", "acme", "--sub", sub, "--roles", roles],
        capture_output=True,
        text=True,
        check=True,
    )
    return made.stdout.strip()


def test_the_executors_check_runs_as_written(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    agent, ana = key(keys, "deployer", "agent"), key(keys, "ana", "ui")
    server = Server("--auth", "keys", "--keys-file", str(keys), "--receipt-key-file", key_file(tmp_path, "r.pem"))
    try:
        outcome: dict = {}
        deploy = Action.of("deploy", {"service": "api", "env": "prod"})
        ask = Ask("s", [question("go", "Deploy api to prod?", options=["Approve", "Reject"])], hold=True, action=deploy)

        def call() -> None:
            with Client(server.addr, token=agent) as client:
                try:
                    outcome["result"] = client.ask(ask)
                except AskgateError as error:
                    outcome["error"] = error

        thread = threading.Thread(target=call)
        thread.start()
        with Client(server.addr, token=ana) as human:
            pending = eventually("the ask", lambda: human.list_pending("s"))
            human.answer("s", pending[0].rpc_id, [select("go", "Approve")])
        thread.join(timeout=WAIT)
        receipt = outcome["result"].receipt
        env = {**os.environ, "ASKGATE_ADDR": server.addr, "ASKGATE_TOKEN": agent, "RECEIPT": receipt}
        code = snippet("executor-python")

        def run() -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=WAIT
            )

        first = run()
        assert first.returncode == 0, first.stderr
        assert "approved by ['ana'] asked by deployer" in first.stdout
        replay = run()
        assert replay.returncode != 0
        assert "RECEIPT_CONSUMED" in replay.stderr
    finally:
        server.stop()
