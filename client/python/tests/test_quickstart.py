"""The README's quickstart, run as written against a real askgate with a bot answering."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from askgate import Ask, AskgateError, Client, Reason, question
from conftest import ASKGATE, Server, eventually


def bot_is_following(addr: str) -> bool:
    """A probe ask: NO_PROVIDER until the bot follows the session, then answered."""
    with Client(addr) as client:
        try:
            client.ask(Ask("team-a/review", [question("probe", "Ready?", options=["yes"])], timeout=5))
            return True
        except AskgateError as error:
            if error.reason is Reason.NO_PROVIDER:
                return False
            raise


def test_the_readme_quickstart_runs(server: Server, capsys) -> None:  # type: ignore[no-untyped-def]
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", readme, re.S)
    assert code, "the README has a Python quickstart"
    bot = subprocess.Popen(
        [ASKGATE, "bot", "--addr", server.addr, "--session", "team-a/review", "--policy", "first"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        eventually("the bot to follow the session", lambda: bot_is_following(server.addr))
        os.environ["ASKGATE_ADDR"] = server.addr
        exec(compile(code.group(1), "README.md", "exec"), {})
    finally:
        del os.environ["ASKGATE_ADDR"]
        bot.kill()
        bot.wait()
    assert capsys.readouterr().out.strip() == "['Postgres (Recommended)'] by anonymous"
