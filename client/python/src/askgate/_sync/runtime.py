"""What the synchronous client needs of its runtime (the asyncio client's is
`askgate._async.runtime`, with the same names): its channel, its sleep and errors, and
the lease of an attached agent."""

from __future__ import annotations

import threading
import time
from typing import Any, Optional

import grpc

from .._connection import Stubs, Target
from .._errors import AskgateError

RpcError = grpc.RpcError
sleep = time.sleep

CLIENT_DOC = """A connection to askgate, for agents (`ask`, `attach`) and for UIs (`follow`,
`answer`, `cancel`, `list_pending`). Thread-safe; close it (or use `with`) when done.

`addr` defaults to `ASKGATE_ADDR` (else `http://127.0.0.1:50051`), `token` to
`ASKGATE_TOKEN` (or the file `ASKGATE_TOKEN_FILE` names)."""


class Channel:
    """The client's channel, opened at once and shared by every thread."""

    def __init__(self, target: Target) -> None:
        self._stubs = Stubs(target.channel(grpc))

    def stubs(self) -> Stubs:
        return self._stubs

    def close(self) -> None:
        self._stubs.channel.close()


def first(stream: Any) -> Any:
    """The stream's first message, or None when it ended without one."""
    try:
        return next(stream)
    except StopIteration:
        return None


class AgentLease:
    """A held `Agents.Attach` stream; `ended` (a `threading.Event`) is set when the
    server ends the lease (a newer attach replaced it, the node drained, the credential
    lapsed), with `error` saying why."""

    def __init__(self, incarnation: str, stream: Any) -> None:
        self.incarnation = incarnation
        self.ended = threading.Event()
        self.error: Optional[AskgateError] = None
        self._stream = stream
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for _heartbeat in self._stream:
                pass
        except grpc.RpcError as failure:
            if failure.code() != grpc.StatusCode.CANCELLED:  # type: ignore[attr-defined]
                self.error = AskgateError.from_rpc_error(failure)
        finally:
            self.ended.set()

    def _stop(self) -> None:
        self._stream.cancel()
        self._reader.join(timeout=5)
