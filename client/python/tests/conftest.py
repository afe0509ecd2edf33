"""A real `askgate serve` for the SDK's tests (the binary is ASKGATE_BIN), a human
played through the same SDK, and a TCP proxy that can cut connections."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator, List

import pytest

ASKGATE = os.environ.get("ASKGATE_BIN") or str(
    Path(__file__).resolve().parents[3] / "target" / "debug" / "askgate"
)
WAIT = 20.0


class Server:
    def __init__(self, *args: str) -> None:
        # Tests choose their engine: memory unless `args` say otherwise.
        env = {**os.environ, "ASKGATE_LOG": "info", "ASKGATE_BACKEND": "memory"}
        self.process = subprocess.Popen(
            [ASKGATE, "serve", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        deadline = time.monotonic() + WAIT
        assert self.process.stderr is not None
        while True:
            line = self.process.stderr.readline()
            match = re.search(r"local_addr=([0-9.:]+)", line)
            if match:
                self.addr = f"http://{match.group(1)}"
                break
            assert line and time.monotonic() < deadline, "askgate serve did not start"
        # Keep draining its log so that it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.process.stderr], daemon=True).start()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=WAIT)


class Proxy:
    """Forwards 127.0.0.1:<port> to the server. `cut()` drops every connection and
    refuses new ones until `restore()`: a network failure with the server still up."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.split("://")[1].rsplit(":", 1)
        self.upstream = (host, int(port))
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.addr = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.sockets: List[socket.socket] = []
        self.lock = threading.Lock()
        self.cut_off = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.cut_off:
                client.close()
                continue
            server = socket.create_connection(self.upstream)
            with self.lock:
                self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        self.cut_off = True
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def restore(self) -> None:
        self.cut_off = False

    def close(self) -> None:
        self.listener.close()
        self.cut()


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.stop()


def eventually(what: str, check, timeout: float = WAIT):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
