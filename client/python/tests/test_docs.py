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
from typing import Optional

from askgate import Action, Ask, AskgateError, Client, question, select
from conftest import ASKGATE, WAIT, Server, eventually
from test_approvals import key_file

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs" / "approvals.md"


def snippet(name: str, doc: Path = DOCS) -> str:
    """A code block of a doc (docs/approvals.md unless named), by the
    `<!-- snippet: NAME -->` line before it."""
    found = re.search(rf"<!-- snippet: {name} -->\n```\w*\n(.*?)```", doc.read_text(), re.S)
    assert found, f"{doc.name} has no snippet {name}"
    return found.group(1)


def run_until_followed(code: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    """Runs an asking snippet as a user would, again while it fails NO_PROVIDER (its
    follower, started just before, is not following yet); any other failure is final."""

    def attempt() -> Optional[subprocess.CompletedProcess]:
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=WAIT
        )
        return None if "NO_PROVIDER" in done.stderr else done

    return eventually("the snippet to be followed", attempt)


def test_the_python_pages_ask_and_follow_snippets_run_together(tmp_path: Path) -> None:
    """docs/python.md's asking snippet, answered by its following snippet, each run as
    written in a process of its own: the follower's answers must fit the asker's
    questions (its labels, its ids)."""
    page = ROOT / "docs" / "python.md"
    server = Server()
    env = {**os.environ, "ASKGATE_ADDR": server.addr}
    follower = subprocess.Popen(
        [sys.executable, "-c", snippet("python-follow", page)],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        asked = run_until_followed(snippet("python-ask", page) + "\nprint(result)\n", env, tmp_path)
        assert asked.returncode == 0, asked.stderr
        assert "Postgres (Recommended)" in asked.stdout, asked.stdout
        assert "Approve" in asked.stdout, asked.stdout
    finally:
        follower.kill()
        _, errors = follower.communicate(timeout=WAIT)
        server.stop()
    assert "Traceback" not in errors, errors


def test_the_readmes_python_quickstart_runs(tmp_path: Path) -> None:
    """README.md's Python quickstart as written, while someone follows `demo` (a bot
    choosing the first option, as a human clicking it would)."""
    server = Server()
    bot = subprocess.Popen(
        [ASKGATE, "bot", "--addr", server.addr, "--session", "demo", "--policy", "first"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        env = {**os.environ, "ASKGATE_ADDR": server.addr}
        done = run_until_followed(snippet("quickstart-python", ROOT / "README.md"), env, tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("['Postgres (Recommended)'] by "), done.stdout
    finally:
        bot.kill()
        bot.wait(timeout=WAIT)
        server.stop()


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
