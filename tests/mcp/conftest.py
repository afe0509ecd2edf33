"""Real askgate processes for the MCP tests: `askgate serve` on an ephemeral port,
`askgate watch` to see what a human's UI sees, and the CLI to answer. The binary is
ASKGATE_BIN (scripts/test.sh points it at the one cargo built)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import queue
import re
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ASKGATE = os.environ.get("ASKGATE_BIN") or str(
    Path(__file__).resolve().parents[2] / "target" / "debug" / "askgate"
)
# Upper bound of any single wait: generous for a loaded machine, short enough that a
# hang fails with a message.
WAIT = 20.0


class Lines:
    """The lines a process writes to one of its pipes, read on a thread."""

    def __init__(self, pipe: Any) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(pipe,), daemon=True).start()

    def _read(self, pipe: Any) -> None:
        for line in pipe:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, what: str, match: Callable[[str], bool], timeout: float = WAIT) -> str:
        """The next line that matches; fails with `what` and the lines seen otherwise."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._queue.get(timeout=max(left, 0.01))
            except queue.Empty:
                raise AssertionError(f"timed out waiting for {what}; seen: {self.seen[-20:]}")
            if line is None:
                raise AssertionError(f"the stream ended before {what}; seen: {self.seen[-20:]}")
            self.seen.append(line)
            if match(line):
                return line


class Askgate:
    """Processes of one test, all ended at teardown."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[str]] = []
        self.served: dict[str, subprocess.Popen[str]] = {}
        self.dir = Path(tempfile.mkdtemp(prefix="askgate-mcp-"))

    def spawn(
        self, *args: str, stdin: Any = subprocess.DEVNULL, log: str = "warn"
    ) -> subprocess.Popen[str]:
        # Tests choose their engine: memory unless `args` say otherwise.
        env = {**os.environ, "ASKGATE_LOG": log, "ASKGATE_BACKEND": "memory"}
        for name in ("ASKGATE_ADDR", "ASKGATE_SESSION", "ASKGATE_TOKEN"):
            env.pop(name, None)
        process = subprocess.Popen(
            [ASKGATE, *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.processes.append(process)
        return process

    def serve(self, *args: str) -> str:
        """`askgate serve` on 127.0.0.1:0; its http:// URL."""
        # At info, so that it says where it listens.
        process = self.spawn("serve", "--listen", "127.0.0.1:0", *args, log="info")
        process.stderr_lines = Lines(process.stderr)  # type: ignore[attr-defined]
        line = process.stderr_lines.until(  # type: ignore[attr-defined]
            "askgate serve to listen", lambda l: "local_addr=" in l
        )
        match = re.search(r"local_addr=([0-9.:]+)", line)
        assert match, line
        url = f"http://{match.group(1)}"
        self.served[url] = process
        return url

    def stop_serving(self, url: str) -> None:
        """Stops the `askgate serve` at `url` as an operator does (SIGTERM), and waits
        for its clean exit."""
        process = self.served.pop(url)
        process.terminate()
        assert process.wait(timeout=WAIT) == 0

    def run(self, *args: str, timeout: float = WAIT) -> tuple[int, str, str]:
        """Runs a client command to its end: (exit code, stdout, stderr)."""
        process = self.spawn(*args)
        stdout, stderr = process.communicate(timeout=timeout)
        return process.returncode, stdout, stderr

    def watch(self, url: str, session: str, token_file: Path | None = None) -> "Watch":
        """`askgate watch`, read until it is synced: asks from then on reach it."""
        extra = ["--token-file", str(token_file)] if token_file else []
        process = self.spawn("watch", "--addr", url, "--session", session, *extra)
        watch = Watch(Lines(process.stdout))
        watch.next("synced", lambda e: "synced" in e)
        return watch

    def keys(
        self, tenant: str, sub: str, roles: str, sessions: str | None = None
    ) -> tuple[Path, Path]:
        """A key added to this test's keys file (limited to `sessions` patterns if
        given): (keys file, a file holding the key)."""
        keys = self.dir / "keys.json"
        limit = ["--sessions", sessions] if sessions else []
        code, stdout, stderr = self.run(
            "keys", "add", "--file", str(keys), "--tenant", tenant, "--sub", sub,
            "--roles", roles, *limit,
        )
        assert code == 0, stderr
        token = self.dir / f"{sub}.key"
        token.write_text(stdout.strip() + "\n")
        token.chmod(0o600)
        return keys, token

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=WAIT)
            for pipe in (process.stdout, process.stderr, process.stdin):
                if pipe:
                    pipe.close()


class Watch:
    """The events of `askgate watch`, as JSON objects."""

    def __init__(self, lines: Lines) -> None:
        self.lines = lines

    def next(self, what: str, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        line = self.lines.until(what, lambda l: match(json.loads(l)))
        return json.loads(line)

    def requested(self) -> dict[str, Any]:
        return self.next("requested", lambda e: "requested" in e)["requested"]

    def resolved(self, rpc_id: str) -> dict[str, Any]:
        return self.next(
            f"resolved {rpc_id}", lambda e: e.get("resolved", {}).get("rpc_id") == rpc_id
        )["resolved"]


@pytest.fixture
def askgate() -> Iterator[Askgate]:
    processes = Askgate()
    yield processes
    processes.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
